package pleg

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/cri"
)

// handleEvents brings the PLEG's view of every pod a batch of runtime
// events names up to date, once per pod: from the newest event's own
// copy of the pod's statuses where that is the whole pod and newer than
// what the PLEG has (eventstatus.go), else by reading the pod, through
// the same path as the relist's. An event whose pod cannot be told (its
// sandbox already gone, and its ID never listed) makes the PLEG relist.
//
// Created events are not read for: a container or sandbox made and not
// yet started is the kubelet's own doing, its start (or failure) comes
// next, and a pod's status changes nothing on it. Reading the pod for
// every one of them doubled the reads while a batch of pods starts, and
// those reads slow containerd 2.x's own creates.
func (p *PLEG) handleEvents(ctx context.Context, batch []*runtimeapi.ContainerEventResponse) {
	views := map[types.UID]*eventView{}
	unknown := false
	for _, e := range batch {
		if e.CreatedAt > 0 { // the runtime's clock is the host's
			p.metrics.EventedConnLatency.Observe(time.Since(time.Unix(0, e.CreatedAt)).Seconds())
		}
		if e.ContainerEventType == runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT {
			continue
		}
		ref, ours, known := p.podOf(e)
		switch {
		case !known:
			unknown = true
			klog.V(4).InfoS("Container event for an unknown container; relisting", "containerID", e.ContainerId, "type", e.ContainerEventType)
		case ours:
			v := views[ref.UID]
			if v == nil {
				v = &eventView{ref: ref}
				views[ref.UID] = v
			}
			v.last = e
			v.mustRead = v.mustRead || e.ContainerEventType == runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT
			klog.V(4).InfoS("Container event", "podUID", ref.UID, "containerID", e.ContainerId, "type", e.ContainerEventType)
		}
	}
	if unknown {
		p.relistSoon()
	}
	if len(views) == 0 {
		return
	}
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	refs := map[types.UID]cri.PodRef{}
	var events []*Event
	for uid, v := range views {
		if st, ts, ok := p.statusFromEvent(ctx, v); ok {
			events = append(events, p.apply(uid, st, ts, ts)...)
		} else {
			refs[uid] = v.ref
		}
	}
	p.readLocked(ctx, refs, events)
}

// podOf tells which pod an event is about. ours is false for sandboxes
// that are not a kubelet's; known is false when nothing tells.
func (p *PLEG) podOf(e *runtimeapi.ContainerEventResponse) (ref cri.PodRef, ours, known bool) {
	if sb := e.GetPodSandboxStatus(); sb != nil && sb.GetMetadata() != nil {
		ref, ours = cri.PodRefFromLabels(sb.GetLabels())
		return ref, ours, true
	}
	// containerd sends a removed sandbox's events without its status.
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pod := range p.pods {
		for _, list := range [][]container.Instance{pod.Sandboxes, pod.Containers} {
			for _, in := range list {
				if in.ID == e.ContainerId {
					return cri.PodRef{UID: pod.ID, Name: pod.Name, Namespace: pod.Namespace}, true, true
				}
			}
		}
	}
	return cri.PodRef{}, false, false
}

// serveWaiting reads the pods whose workers wait for a status newer than
// their last sync. With a relist only every EventedPeriod they would
// otherwise wait that long whenever their last sync caused no event.
func (p *PLEG) serveWaiting(ctx context.Context) {
	uids := p.cache.Waiting()
	if len(uids) == 0 {
		return
	}
	refs := make(map[types.UID]cri.PodRef, len(uids))
	p.mu.Lock()
	for _, uid := range uids {
		ref := cri.PodRef{UID: uid}
		if pod := p.pods[uid]; pod != nil {
			ref.Name, ref.Namespace = pod.Name, pod.Namespace
		}
		refs[uid] = ref
	}
	p.mu.Unlock()
	p.readPods(ctx, refs)
}

// readPods reads the pods' statuses into the cache, records what runs
// as a relist would, and sends an event per change since the last look.
// A failed read leaves the cache alone; the next relist reads again.
func (p *PLEG) readPods(ctx context.Context, refs map[types.UID]cri.PodRef) {
	if len(refs) == 0 {
		return
	}
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	p.readLocked(ctx, refs, nil)
}

// readLocked is readPods with p.syncMu held; events are those to send
// with the reads'.
func (p *PLEG) readLocked(ctx context.Context, refs map[types.UID]cri.PodRef, events []*Event) {
	ts := p.clock.Now()
	for uid, ref := range refs {
		st, err := p.rt.GetPodStatus(ctx, ref)
		if err != nil {
			klog.ErrorS(err, "PLEG: reading pod status after an event failed", "podUID", uid)
			p.mu.Lock()
			p.reinspect[uid] = true
			p.mu.Unlock()
			continue
		}
		if ref.Name == "" && len(st.Sandboxes) > 0 { // a pod read before it was ever listed
			md := st.Sandboxes[0].GetMetadata()
			st.Name, st.Namespace = md.GetName(), md.GetNamespace()
		}
		events = append(events, p.apply(uid, st, ts, p.clock.Now())...)
	}
	if len(events) == 0 && len(refs) == 0 {
		return
	}
	// The running gauges follow the reads too, not only the relist, which
	// comes every EventedPeriod while events flow.
	p.mu.Lock()
	p.recordRunning(p.pods)
	p.mu.Unlock()
	p.send(events)
}

// apply makes st the PLEG's view of the pod and its cache entry, stamped
// ts (no newer than what st shows), the view current until fresh, and
// returns the events of the change.
func (p *PLEG) apply(uid types.UID, st *container.PodStatus, ts, fresh time.Time) []*Event {
	now := podFromStatus(st)
	p.mu.Lock()
	old := p.pods[uid]
	// A pod read as gone stays as an empty record, so the next relist
	// sees it go and drops its cache entry.
	p.pods[uid] = now
	p.markFresh(uid, fresh)
	p.mu.Unlock()
	p.cache.Set(uid, st, nil, ts)
	if old == nil && len(now.Sandboxes)+len(now.Containers) == 0 {
		return nil
	}
	return diffPod(old, now)
}

// podFromStatus is the relist's view of a pod read in full.
func podFromStatus(st *container.PodStatus) *container.Pod {
	pod := &container.Pod{ID: st.ID, Name: st.Name, Namespace: st.Namespace}
	for _, sb := range st.Sandboxes {
		state := container.StateExited
		if sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			state = container.StateRunning
		}
		pod.Sandboxes = append(pod.Sandboxes, container.Instance{ID: sb.GetId(), State: state})
	}
	for _, c := range st.Containers {
		pod.Containers = append(pod.Containers, container.Instance{ID: c.ID, Name: c.Name, State: c.State})
	}
	return pod
}
