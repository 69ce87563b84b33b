package pleg

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/cri"
)

// A container event from containerd carries the status of the event's
// sandbox and of every container in it, taken when the event was made.
// Where that is the whole pod, the PLEG takes the pod's status from the
// event instead of reading it back from the runtime (two list calls and
// a status call per sandbox and container). It reads instead whenever
// the event may not be the whole pod, or not the newest view of it:
//   - the event removes something (a removal changes what the pod has);
//   - the pod has more than one sandbox, or another sandbox than the
//     event's, or a container the event does not list;
//   - a pod the PLEG does not know yet, unless the event is its
//     sandbox's own (a new pod's first event) after a relist;
//   - the event was made before the PLEG's last relist or read of the
//     pod ended (its view could be older than the one the PLEG has).
// The relist stays the safety net, as for every event.

// eventView is the newest usable event of one pod in a batch.
type eventView struct {
	ref      cri.PodRef
	last     *runtimeapi.ContainerEventResponse
	mustRead bool // an event of the batch cannot stand for a read
}

// statusFromEvent returns the pod's status as the event carries it and
// the time it stands for, or ok false when the pod must be read.
func (p *PLEG) statusFromEvent(ctx context.Context, v *eventView) (st *container.PodStatus, ts time.Time, ok bool) {
	e := v.last
	sb := e.GetPodSandboxStatus()
	if v.mustRead || e.CreatedAt <= 0 || sb.GetId() == "" {
		return nil, time.Time{}, false
	}
	ts = time.Unix(0, e.CreatedAt)
	p.mu.Lock()
	usable := !p.relistDone.IsZero() && ts.After(p.relistDone) && ts.After(p.fresh[v.ref.UID]) &&
		wholePod(p.pods[v.ref.UID], e)
	p.mu.Unlock()
	if !usable {
		return nil, time.Time{}, false
	}
	return p.rt.PodStatusOf(ctx, v.ref, []*runtimeapi.PodSandboxStatus{sb}, e.ContainersStatuses), ts, true
}

// wholePod tells whether the event's sandbox and containers are all of
// the pod known as rec (nil: a pod not seen yet).
func wholePod(rec *container.Pod, e *runtimeapi.ContainerEventResponse) bool {
	sbID := e.GetPodSandboxStatus().GetId()
	listed := make(map[string]bool, len(e.ContainersStatuses))
	for _, c := range e.ContainersStatuses {
		listed[c.GetId()] = true
	}
	if e.ContainerId != sbID && !listed[e.ContainerId] {
		return false
	}
	if rec == nil || len(rec.Sandboxes)+len(rec.Containers) == 0 {
		return e.ContainerId == sbID
	}
	if len(rec.Sandboxes) != 1 || rec.Sandboxes[0].ID != sbID {
		return false
	}
	for _, c := range rec.Containers {
		if !listed[c.ID] {
			return false
		}
	}
	return true
}

// markFresh records that the PLEG's view of the pod is current at ts.
// Called with p.mu held.
func (p *PLEG) markFresh(uid types.UID, ts time.Time) {
	if ts.After(p.fresh[uid]) {
		p.fresh[uid] = ts
	}
}
