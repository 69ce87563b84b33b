package shutdown

import (
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// Priorities upstream's migration of the two plain grace periods uses:
// pods below system-cluster-critical share the first budget, critical
// pods the second.
const (
	defaultPriority  int32 = 0
	criticalPriority int32 = 2000000000 // system-cluster-critical
)

// Group is one priority range of the shutdown: pods of at least Priority
// (and below the next group's) stop within GracePeriodSeconds.
type Group struct {
	Priority           int32
	GracePeriodSeconds int64
}

// Groups are the shutdown's priority groups from the configuration, lowest
// priority first: shutdownGracePeriodByPodPriority when set (and its
// feature gate is on), else shutdownGracePeriod split into the
// critical pods' share and the rest. None: graceful shutdown is off.
func Groups(kc *kubeletconfigv1beta1.KubeletConfiguration, byPriority bool) []Group {
	var out []Group
	if byPriority && len(kc.ShutdownGracePeriodByPodPriority) > 0 {
		for _, g := range kc.ShutdownGracePeriodByPodPriority {
			out = append(out, Group{Priority: g.Priority, GracePeriodSeconds: g.ShutdownGracePeriodSeconds})
		}
	} else {
		out = fromGracePeriods(kc.ShutdownGracePeriod.Duration, kc.ShutdownGracePeriodCriticalPods.Duration)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Priority < out[j].Priority })
	return out
}

// fromGracePeriods splits shutdownGracePeriod: the critical pods get their
// share last, the others the rest first. Nothing when total is zero or
// smaller than the critical share.
func fromGracePeriods(total, critical time.Duration) []Group {
	if total == 0 || critical > total {
		return nil
	}
	return []Group{
		{Priority: defaultPriority, GracePeriodSeconds: int64((total - critical) / time.Second)},
		{Priority: criticalPriority, GracePeriodSeconds: int64(critical / time.Second)},
	}
}

// Budget is the time the whole shutdown may take: the groups' budgets
// added up. logind must let a delay inhibitor hold the shutdown that long.
func Budget(groups []Group) time.Duration {
	var s int64
	for _, g := range groups {
		s += g.GracePeriodSeconds
	}
	return time.Duration(s) * time.Second
}

// Batch is a group and the pods that stop in it.
type Batch struct {
	Group
	Pods []*v1.Pod
}

// Assign puts each pod in the group of the highest priority not above its
// own; pods below the lowest group go to the lowest, as upstream.
// groups must be sorted (Groups does) and not empty.
func Assign(groups []Group, pods []*v1.Pod) []Batch {
	out := make([]Batch, len(groups))
	for i, g := range groups {
		out[i].Group = g
	}
	for _, p := range pods {
		var prio int32
		if p.Spec.Priority != nil {
			prio = *p.Spec.Priority
		}
		// The first group at or above the pod's priority; the one before
		// when that one is above it.
		i := sort.Search(len(groups), func(i int) bool { return groups[i].Priority >= prio })
		switch {
		case i == len(groups):
			i--
		case i > 0 && groups[i].Priority > prio:
			i--
		}
		out[i].Pods = append(out[i].Pods, p)
	}
	return out
}

// GracePeriod is how long a pod of the batch gets to stop: the group's
// budget, or the pod's own terminationGracePeriodSeconds when shorter.
func (b Batch) GracePeriod(p *v1.Pod) int64 {
	if t := p.Spec.TerminationGracePeriodSeconds; t != nil && *t < b.GracePeriodSeconds {
		return *t
	}
	return b.GracePeriodSeconds
}
