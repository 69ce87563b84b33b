package resize

import (
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Recorder emits Kubernetes Events; client-go's record.EventRecorder fits.
type Recorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

// Config is what a Manager works with.
type Config struct {
	Store    *Store
	Clock    clock.Clock
	Recorder Recorder
	// Pod returns the newest spec of a pod a source wants.
	Pod func(types.UID) (*v1.Pod, bool)
	// Active returns the admitted pods that have not finished, as desired.
	Active func() []*v1.Pod
	// Allocatable is the node's allocatable; nil while no Node is known.
	Allocatable func() v1.ResourceList
	// Static reports whether a pod comes from a source other than the
	// apiserver: those cannot resize.
	Static func(*v1.Pod) bool
	// Sync asks for a sync of the pod: its allocation or its conditions
	// changed.
	Sync func(types.UID)
}

// Manager decides resizes and keeps their conditions.
type Manager struct {
	cfg Config

	mu      sync.Mutex // one allocation decision at a time
	pending []types.UID
	conds   map[types.UID]*conditions
}

// conditions are a pod's resize conditions, nil when not set.
type conditions struct {
	pending, inProgress *v1.PodCondition
}

// NewManager returns a Manager.
func NewManager(cfg Config) *Manager {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Manager{cfg: cfg, conds: map[types.UID]*conditions{}}
}

// Allocated returns the pod with its containers' resources as allocated
// (the spec's until a resize is accepted), and whether they differ.
func (m *Manager) Allocated(pod *v1.Pod) (*v1.Pod, bool) {
	a, ok := m.cfg.Store.Allocated(pod.UID)
	if !ok {
		return pod, false
	}
	return WithAllocation(pod, a)
}

// AllocatedAll maps pods to their allocated views.
func (m *Manager) AllocatedAll(pods []*v1.Pod) []*v1.Pod {
	out := make([]*v1.Pod, len(pods))
	for i, p := range pods {
		out[i], _ = m.Allocated(p)
	}
	return out
}

// Admitted records the allocation of a pod just admitted: its spec's,
// unless a checkpoint (from before a restart) already holds one, which
// stays the truth until a resize is accepted again.
func (m *Manager) Admitted(pod *v1.Pod) {
	p, _ := m.Allocated(pod)
	if err := m.cfg.Store.SetAllocated(pod.UID, AllocationOf(p)); err != nil {
		klog.ErrorS(err, "Cannot checkpoint the pod's allocated resources", "pod", klog.KObj(pod))
	}
}

// Push queues a pod whose spec may ask for a resize; the next Retry
// decides it.
func (m *Manager) Push(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !slices.Contains(m.pending, uid) {
		m.pending = append(m.pending, uid)
	}
}

// Resized queues a pod whose spec changed and retries every pending
// resize, the new one among them, in upstream's order.
func (m *Manager) Resized(uid types.UID) {
	m.Push(uid)
	m.Retry()
}

// Retry decides every pending resize again, in upstream's order: once
// other pods freed resources, a deferred one may fit.
func (m *Manager) Retry() {
	m.mu.Lock()
	defer m.mu.Unlock()
	var waiting []Waiting
	for _, uid := range m.pending {
		pod, ok := m.cfg.Pod(uid)
		if !ok {
			continue
		}
		alloc, _ := m.Allocated(pod)
		w := Waiting{Pod: pod, Increasing: IncreasesRequests(pod, alloc)}
		if c := m.conds[uid]; c != nil && c.pending != nil {
			w.Since = c.pending.LastTransitionTime.Time
		}
		waiting = append(waiting, w)
	}
	slices.SortStableFunc(waiting, func(a, b Waiting) int {
		switch {
		case Before(a, b):
			return -1
		case Before(b, a):
			return 1
		}
		return 0
	})
	m.pending = m.pending[:0]
	for _, w := range waiting {
		before := m.snapshot(w.Pod.UID)
		allocated, err := m.handle(w.Pod)
		if err != nil {
			klog.ErrorS(err, "Failed to handle pod resize", "pod", klog.KObj(w.Pod))
		}
		if err != nil || m.deferred(w.Pod.UID) {
			m.pending = append(m.pending, w.Pod.UID)
		}
		if allocated || before != m.snapshot(w.Pod.UID) {
			m.cfg.Sync(w.Pod.UID)
		}
	}
}

// handle decides one pod's resize: allocate it, or say why not.
func (m *Manager) handle(pod *v1.Pod) (bool, error) {
	alloc, differs := m.Allocated(pod)
	if !differs {
		m.cond(pod.UID).pending = nil
		return false, nil
	}
	others := m.AllocatedAll(m.cfg.Active())
	var allocatable v1.ResourceList
	if m.cfg.Allocatable != nil {
		allocatable = m.cfg.Allocatable()
	}
	reason, msg := Check(pod, others, allocatable, m.cfg.Static != nil && m.cfg.Static(pod))
	if reason != "" {
		if m.setPending(pod.UID, reason, msg, pod.Generation) {
			ev := "ResizeDeferred"
			if reason == ReasonInfeasible {
				ev = "ResizeInfeasible"
			}
			m.event(pod, v1.EventTypeWarning, ev, eventMessage("Pod resize "+reason, pod, msg))
		}
		return false, nil
	}
	if err := m.cfg.Store.SetAllocated(pod.UID, AllocationOf(pod)); err != nil {
		return false, err
	}
	c := m.cond(pod.UID)
	c.pending, c.inProgress = nil, nil // older errors are over
	m.setInProgress(pod.UID, "", "", pod.Generation)
	klog.InfoS("Pod resize allocated", "pod", klog.KObj(pod), "from", AllocationOf(alloc), "to", AllocationOf(pod))
	m.event(pod, v1.EventTypeNormal, "ResizeStarted", eventMessage("Pod resize started", pod, ""))
	return true, nil
}

// Track sets or clears PodResizeInProgress after a sync of the allocated
// pod: a resize is in progress while a running container's actuated
// resources differ from its allocated ones.
func (m *Manager) Track(allocated *v1.Pod, running func(name string) bool) {
	busy := false
	Resizable(allocated, func(c *v1.Container) {
		if !running(c.Name) {
			return // it gets the allocated resources when it starts
		}
		if act, ok := m.cfg.Store.Actuated(allocated.UID, c.Name); ok && !Plan(c, act).None() {
			busy = true
		}
	})
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.cond(allocated.UID)
	switch {
	case busy:
		m.setInProgress(allocated.UID, "", "", allocated.Generation)
	case c.inProgress != nil:
		c.inProgress = nil
		m.event(allocated, v1.EventTypeNormal, "ResizeCompleted", eventMessage("Pod resize completed", allocated, ""))
	}
}

// Failed reports that applying the pod's allocation failed: the resize
// stays in progress with reason Error and the message, until it succeeds.
func (m *Manager) Failed(allocated *v1.Pod, msg string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.setInProgress(allocated.UID, ReasonError, msg, allocated.Generation) {
		m.event(allocated, v1.EventTypeWarning, "ResizeError", eventMessage("Pod resize error", allocated, msg))
	}
}

// Conditions returns the pod's resize conditions (the status leaves
// them out once the pod is terminal).
func (m *Manager) Conditions(uid types.UID) []v1.PodCondition {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.conds[uid]
	if c == nil {
		return nil
	}
	var out []v1.PodCondition
	for _, p := range []*v1.PodCondition{c.pending, c.inProgress} {
		if p != nil {
			out = append(out, *p.DeepCopy())
		}
	}
	return out
}

// Forget drops what is kept of a pod that is gone.
func (m *Manager) Forget(uid types.UID) {
	m.mu.Lock()
	delete(m.conds, uid)
	m.pending = slices.DeleteFunc(m.pending, func(u types.UID) bool { return u == uid })
	m.mu.Unlock()
	if err := m.cfg.Store.Remove(uid); err != nil {
		klog.ErrorS(err, "Cannot remove the pod's resize checkpoint", "podUID", uid)
	}
}

func (m *Manager) cond(uid types.UID) *conditions {
	c := m.conds[uid]
	if c == nil {
		c = &conditions{}
		m.conds[uid] = c
	}
	return c
}

func (m *Manager) deferred(uid types.UID) bool {
	c := m.conds[uid]
	return c != nil && c.pending != nil && c.pending.Reason == ReasonDeferred
}

// snapshot is a comparable digest of a pod's conditions.
func (m *Manager) snapshot(uid types.UID) [2]string {
	c := m.conds[uid]
	var out [2]string
	if c == nil {
		return out
	}
	if c.pending != nil {
		out[0] = c.pending.Reason + "/" + c.pending.Message
	}
	if c.inProgress != nil {
		out[1] = "true/" + c.inProgress.Reason + "/" + c.inProgress.Message
	}
	return out
}

// setPending sets PodResizePending and reports whether its reason or
// message changed.
func (m *Manager) setPending(uid types.UID, reason, msg string, gen int64) bool {
	c := m.cond(uid)
	changed := c.pending == nil || c.pending.Reason != reason || c.pending.Message != msg
	c.pending = m.condition(v1.PodResizePending, c.pending, reason, msg, gen)
	return changed
}

// setInProgress sets PodResizeInProgress; with no reason and message it
// keeps those it had (an error stays until the resize succeeds), as
// upstream. It reports whether the reason or message changed.
func (m *Manager) setInProgress(uid types.UID, reason, msg string, gen int64) bool {
	c := m.cond(uid)
	if reason == "" && msg == "" && c.inProgress != nil {
		reason, msg = c.inProgress.Reason, c.inProgress.Message
	}
	changed := c.inProgress == nil || c.inProgress.Reason != reason || c.inProgress.Message != msg
	c.inProgress = m.condition(v1.PodResizeInProgress, c.inProgress, reason, msg, gen)
	return changed
}

// condition is a True resize condition; its transition time moves only
// when its reason does, as upstream.
func (m *Manager) condition(t v1.PodConditionType, old *v1.PodCondition, reason, msg string, gen int64) *v1.PodCondition {
	now := metav1.NewTime(m.cfg.Clock.Now())
	c := &v1.PodCondition{Type: t, Status: v1.ConditionTrue, ObservedGeneration: gen,
		LastProbeTime: now, LastTransitionTime: now, Reason: reason, Message: msg}
	if old != nil && old.Reason == reason {
		c.LastTransitionTime = old.LastTransitionTime
	}
	return c
}

func (m *Manager) event(pod *v1.Pod, kind, reason, msg string) {
	if m.cfg.Recorder != nil {
		m.cfg.Recorder.Eventf(pod, kind, reason, "%s", msg)
	}
}
