package kubelet

import (
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/podstatus"
)

// An exceeded spec.activeDeadlineSeconds, as upstream reports it.
const (
	deadlineReason  = "DeadlineExceeded"
	deadlineMessage = "Pod was active on the node longer than the specified deadline"
)

// checkActiveDeadline fails a pod that has been active longer than its
// spec.activeDeadlineSeconds, counted from its status.startTime, as
// upstream's active deadline handler: the pod is then stopped (within its
// grace period) and ends Failed with reason DeadlineExceeded. It returns
// how long the pod has left, for a sync then; 0 when it has no deadline
// or is past it.
func (k *Kubelet) checkActiveDeadline(pod *v1.Pod, now time.Time) time.Duration {
	if pod.Spec.ActiveDeadlineSeconds == nil {
		return 0
	}
	deadline := time.Duration(*pod.Spec.ActiveDeadlineSeconds) * time.Second
	known, ok := k.statuses.Status(pod.UID)
	if !ok {
		known = pod.Status // the apiserver's, when Skiff just started
	}
	if podstatus.IsTerminal(known.Phase) {
		return 0 // done already, and a terminal phase is final
	}
	start := known.StartTime
	if start == nil { // not started: the first status starts the clock
		return deadline
	}
	if left := start.Add(deadline).Sub(now); left > 0 {
		return left
	}
	if k.fail(pod, podFailure{reason: deadlineReason, message: deadlineMessage}) {
		k.recorder.Eventf(pod, v1.EventTypeNormal, deadlineReason, "%s", deadlineMessage)
	}
	return 0
}
