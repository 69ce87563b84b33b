package kubelet

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/eviction"
	"github.com/skiff-sh/skiff/internal/podstatus"
)

// evictablePods are the active pods but static ones, which upstream
// treats as critical and never evicts.
func (k *Kubelet) evictablePods() []*v1.Pod {
	var out []*v1.Pod
	for _, p := range k.activePods() {
		if !IsStaticPod(p) && k.records.get(p.UID).failure == nil {
			out = append(out, p)
		}
	}
	return out
}

// evict stops the pod within grace seconds and fails it with reason
// Evicted; false if it already was.
func (k *Kubelet) evict(p *v1.Pod, grace int64, message string) bool {
	f := podFailure{reason: eviction.Reason, message: message, disruption: true, at: metav1.NewTime(k.clock.Now())}
	if !k.fail(p, f) {
		return false
	}
	klog.InfoS("Evicting pod", "pod", klog.KObj(p), "gracePeriod", grace, "message", message)
	k.recorder.Eventf(p, v1.EventTypeWarning, eviction.Reason, "%s", message)
	k.workers.Terminate(p, &grace)
	return true
}

// fail records that the pod is to end Failed for f; false if it already is.
func (k *Kubelet) fail(p *v1.Pod, f podFailure) bool {
	first := false
	k.records.update(p.UID, func(r *podRecord) {
		if r.failure == nil {
			r.failure, first = &f, true
		}
	})
	return first
}

// applyFailure makes the status of a pod Skiff failed Failed with its
// reason and message, and an evicted pod's with the DisruptionTarget
// condition upstream adds.
func applyFailure(f *podFailure, s *v1.PodStatus) {
	if f == nil {
		return
	}
	// Failed even when the containers exited 0 on SIGTERM, as upstream.
	s.Phase, s.Reason, s.Message = v1.PodFailed, f.reason, f.message
	if !f.disruption {
		return
	}
	for _, c := range s.Conditions {
		if c.Type == v1.DisruptionTarget {
			return
		}
	}
	s.Conditions = append(s.Conditions, v1.PodCondition{
		Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonTerminationByKubelet,
		Message: f.message, LastTransitionTime: f.at,
	})
}

// holdTerminalPhase keeps a pod out of a terminal phase while one of its
// containers still runs, as upstream's mergePodStatus does: a pod
// reported Failed or Succeeded must hold nothing any more, or a
// controller replaces it while it still does. The old phase, reason and
// message stay until the containers are gone; conditions (an eviction's
// DisruptionTarget) go out at once.
func holdTerminalPhase(old v1.PodStatus, s *v1.PodStatus, st *container.PodStatus) {
	if podstatus.IsTerminal(old.Phase) || !podstatus.IsTerminal(s.Phase) || st == nil {
		return
	}
	for _, c := range st.Containers {
		if c.State == container.StateRunning {
			s.Phase, s.Reason, s.Message = old.Phase, old.Reason, old.Message
			return
		}
	}
}
