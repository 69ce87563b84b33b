package statusmanager

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/internal/podstatus"
)

// kubeletConditions are the pod conditions the kubelet owns; others (the
// scheduler's PodScheduled, DisruptionTarget, readiness gates) are kept as
// the apiserver has them.
var kubeletConditions = map[v1.PodConditionType]bool{
	v1.PodReadyToStartContainers: true,
	v1.PodInitialized:            true,
	v1.ContainersReady:           true,
	v1.PodReady:                  true,
	v1.PodResizePending:          true,
	v1.PodResizeInProgress:       true,
}

// mergeStatus combines the status the apiserver holds with the kubelet's,
// as upstream's mergePodStatus: kubelet-owned conditions from the kubelet,
// other conditions kept, PodScheduled added only if missing, a terminal
// phase never regressing, and the resource claim statuses kept.
func mergeStatus(api, kubelet v1.PodStatus) v1.PodStatus {
	out := *kubelet.DeepCopy()
	out.Conditions = nil
	have := map[v1.PodConditionType]bool{}
	for _, c := range api.Conditions {
		if !kubeletConditions[c.Type] {
			if c.Type == v1.PodScheduled {
				// Upstream's kubelet owns PodScheduled and reports it for
				// the pod's generation; keeping the scheduler's (its
				// reason, its time), it takes the kubelet's generation.
				c.ObservedGeneration = observedGeneration(kubelet.Conditions, c.Type, c.ObservedGeneration)
			}
			out.Conditions = append(out.Conditions, c)
			have[c.Type] = true
		}
	}
	for _, c := range kubelet.Conditions {
		if kubeletConditions[c.Type] || !have[c.Type] {
			out.Conditions = append(out.Conditions, c)
		}
	}
	if podstatus.IsTerminal(api.Phase) && !podstatus.IsTerminal(out.Phase) {
		out.Phase = api.Phase
	}
	if out.StartTime == nil {
		out.StartTime = api.StartTime
	}
	if api.NominatedNodeName != "" {
		out.NominatedNodeName = api.NominatedNodeName
	}
	// The resource claim controller's, as upstream: the node may not
	// change them (NodeRestriction refuses the whole patch).
	out.ResourceClaimStatuses = api.ResourceClaimStatuses
	out.ExtendedResourceClaimStatus = api.ExtendedResourceClaimStatus
	return out
}

// observedGeneration is the generation the kubelet's condition of that
// type observed, or def without one.
func observedGeneration(conds []v1.PodCondition, t v1.PodConditionType, def int64) int64 {
	for _, c := range conds {
		if c.Type == t && c.ObservedGeneration != 0 {
			return c.ObservedGeneration
		}
	}
	return def
}

// equalIgnoringTimes compares statuses with condition probe times cleared,
// so heartbeats alone don't cause writes.
func equalIgnoringTimes(a, b v1.PodStatus) bool {
	a, b = *a.DeepCopy(), *b.DeepCopy()
	for _, s := range []*v1.PodStatus{&a, &b} {
		for i := range s.Conditions {
			s.Conditions[i].LastProbeTime = metav1.Time{}
		}
	}
	return equality.Semantic.DeepEqual(a, b)
}
