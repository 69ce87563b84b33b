package podstatus

import (
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/internal/cri"
)

// SetContainerReadiness marks the running container of runtime ID
// containerID ready or not in s, and brings the pod's ContainersReady and
// Ready conditions in line, as upstream's status manager does the moment
// a readiness probe's result changes: the pod turns Ready without
// waiting for its next sync. It reports whether s has a running
// container of that ID (found), and whether s changed: it does not when
// there is none, or its readiness is already so.
func SetContainerReadiness(pod *v1.Pod, s *v1.PodStatus, containerID string, ready bool, now time.Time) (changed, found bool) {
	cs := findRunning(s, containerID)
	if cs == nil {
		return false, false
	}
	if cs.Ready == ready {
		return false, true
	}
	cs.Ready = ready
	podReady, reason, msg := readiness(pod, s)
	status := v1.ConditionFalse
	if podReady {
		status, reason, msg = v1.ConditionTrue, "", ""
	}
	for i := range s.Conditions {
		c := &s.Conditions[i]
		if c.Type != v1.ContainersReady && c.Type != v1.PodReady {
			continue
		}
		if c.Status != status {
			c.LastTransitionTime = metav1.NewTime(now)
		}
		c.Status, c.Reason, c.Message = status, reason, msg
	}
	return true, true
}

// findRunning finds the running app or init container of runtime ID id.
func findRunning(s *v1.PodStatus, id string) *v1.ContainerStatus {
	for _, list := range [][]v1.ContainerStatus{s.ContainerStatuses, s.InitContainerStatuses} {
		for i := range list {
			if cs := &list[i]; cri.RuntimeID(cs.ContainerID) == id && cs.State.Running != nil {
				return cs
			}
		}
	}
	return nil
}
