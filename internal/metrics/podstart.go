package metrics

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PodStarts follows pods from first sight to all containers started and
// records kubelet_pod_start_duration_seconds and the SLI histograms. A pod
// whose first reported status already shows it started (one adopted by a
// restarted Skiff) is not observed: its start was not seen.
var PodStarts = &podStartTracker{pods: map[types.UID]*podStart{}}

type podStart struct {
	firstSeen          time.Time
	reported           bool // a status was reported since first sight
	done               bool
	pullStart, pullEnd time.Time // first pull start, last pull end
}

type podStartTracker struct {
	mu   sync.Mutex
	pods map[types.UID]*podStart
}

// Seen records the first time Skiff sees the pod; later calls do nothing.
func (t *podStartTracker) Seen(uid types.UID, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.pods[uid]; !ok {
		t.pods[uid] = &podStart{firstSeen: now}
	}
}

// Pulled records an image pull for the pod, excluded from the SLI.
func (t *podStartTracker) Pulled(uid types.UID, start, end time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.pods[uid]
	if !ok || p.done {
		return
	}
	if p.pullStart.IsZero() || start.Before(p.pullStart) {
		p.pullStart = start
	}
	if end.After(p.pullEnd) {
		p.pullEnd = end
	}
}

// Status looks at a pod's newly computed status and observes the start
// durations the first time every app container has started.
func (t *podStartTracker) Status(pod *v1.Pod, st *v1.PodStatus, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.pods[pod.UID]
	if !ok || p.done {
		return
	}
	started := allStarted(pod, st)
	first := !p.reported
	p.reported = true
	if !started {
		return
	}
	p.done = true
	if first {
		return // already running when first seen: nothing to measure
	}
	PodStartDuration.Observe(now.Sub(p.firstSeen).Seconds())
	if created := pod.CreationTimestamp.Time; !created.IsZero() {
		total := now.Sub(created)
		PodStartTotalDuration.Observe(total.Seconds())
		PodStartSLIDuration.Observe((total - p.pullEnd.Sub(p.pullStart)).Seconds())
	}
}

// Forget drops a pod that is gone.
func (t *podStartTracker) Forget(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pods, uid)
}

func allStarted(pod *v1.Pod, st *v1.PodStatus) bool {
	if len(st.ContainerStatuses) < len(pod.Spec.Containers) {
		return false
	}
	for _, cs := range st.ContainerStatuses {
		switch {
		case cs.State.Running != nil:
		case cs.State.Terminated != nil && !cs.State.Terminated.StartedAt.IsZero():
		default:
			return false
		}
	}
	return true
}
