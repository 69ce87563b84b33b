// Package statusmanager keeps the latest status Skiff computed for every
// pod (the one copy the kubelet, its prober and its API read) and reports
// it to the apiserver: it patches pods/status when that
// differs from what the apiserver holds, retries until it lands (also across
// apiserver outages), and deletes a pod's API object once the pod was deleted
// and every container of it is gone. Static pods report through their mirror
// pods.
//
// Patches are computed against the newest copy of the pod it knows — the
// informer's or the response to its own last patch, whichever is newer — so
// reporting a status costs one request and no GET.
package statusmanager

import (
	"context"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/clock"
)

// Pods is what the manager needs to know of the pods on the node.
type Pods interface {
	// Latest returns the apiserver's newest known copy of the pod the status
	// of pod is reported on: pod itself, or the mirror pod of a static pod.
	// ok is false when there is none (yet).
	Latest(pod *v1.Pod) (target *v1.Pod, ok bool)
}

// defaultSyncPeriod is how often unsynced statuses are retried, as
// upstream.
const defaultSyncPeriod = 10 * time.Second

// Config configures a Manager.
type Config struct {
	// Client reports statuses; nil when standalone, where the Manager only
	// keeps them and Run must not run.
	Client corev1client.CoreV1Interface
	Pods   Pods
	// SyncPeriod is how often unsynced statuses are retried; 0: 10 s.
	SyncPeriod time.Duration
	// Clock ticks SyncPeriod; nil: the real one.
	Clock clock.WithTicker
}

// Manager keeps and reports pod statuses.
type Manager struct {
	client corev1client.CoreV1Interface
	pods   Pods
	period time.Duration
	clock  clock.WithTicker

	mu      sync.Mutex
	entries map[types.UID]*entry
	dirty   chan struct{}
}

type entry struct {
	pod        *v1.Pod // the pod as the kubelet runs it
	status     v1.PodStatus
	version    uint64  // bumped on every change of status
	synced     uint64  // version last written to the apiserver
	patched    *v1.Pod // the apiserver's response to the last patch
	terminated bool    // no container of the pod runs any more
	deleted    bool    // the API object is gone
}

// New returns a Manager.
func New(cfg Config) *Manager {
	if cfg.SyncPeriod <= 0 {
		cfg.SyncPeriod = defaultSyncPeriod
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Manager{
		client: cfg.Client, pods: cfg.Pods, period: cfg.SyncPeriod, clock: cfg.Clock,
		entries: map[types.UID]*entry{}, dirty: make(chan struct{}, 1),
	}
}

// SetPodStatus records the pod's latest status and reports it if it changed.
func (m *Manager) SetPodStatus(pod *v1.Pod, s v1.PodStatus) {
	m.SetPodStatusAt(pod, s, anyVersion)
}

// anyVersion makes SetPodStatusAt record whatever changed before.
const anyVersion = ^uint64(0)

// SetPodStatusAt is SetPodStatus unless the pod's recorded status is no
// longer at version (as StatusVersion gave it): then it records nothing
// and returns false, so that a status computed from what was recorded
// does not overwrite a change made meanwhile (UpdateStatus).
func (m *Manager) SetPodStatusAt(pod *v1.Pod, s v1.PodStatus, version uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entries[pod.UID]
	if version != anyVersion && (e == nil && version != 0 || e != nil && e.version != version) {
		return false
	}
	if e == nil {
		e = &entry{}
		m.entries[pod.UID] = e
	}
	e.pod = pod
	if e.version > 0 && equalIgnoringTimes(e.status, s) {
		return true
	}
	e.status = *s.DeepCopy()
	e.version++
	m.markDirty()
	return true
}

// UpdateStatus changes the pod's recorded status in place with change,
// which gets the pod as last recorded and a copy of its status and says
// whether it changed it; a change is reported. A pod with no status
// recorded yet is left alone.
func (m *Manager) UpdateStatus(uid types.UID, change func(pod *v1.Pod, s *v1.PodStatus) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entries[uid]
	if e == nil || e.version == 0 {
		return
	}
	s := e.status.DeepCopy()
	if !change(e.pod, s) || equalIgnoringTimes(e.status, *s) {
		return
	}
	e.status = *s
	e.version++
	m.markDirty()
}

// TerminatePod records that none of the pod's containers runs any more: a
// deleted pod's API object can now go.
func (m *Manager) TerminatePod(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.entries[pod.UID]; e != nil {
		e.pod, e.terminated = pod, true
		m.markDirty()
	}
}

// PodUpdated tells the manager the pod changed in the apiserver (e.g. it
// got a deletionTimestamp), so it is looked at again.
func (m *Manager) PodUpdated(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.entries[pod.UID]; e != nil {
		e.pod = pod
		m.markDirty()
	}
}

// RemovePod forgets a pod: nothing of it runs and no source wants it.
func (m *Manager) RemovePod(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.entries, uid)
}

// Status returns the latest status recorded for a pod.
func (m *Manager) Status(uid types.UID) (v1.PodStatus, bool) {
	s, _, ok := m.StatusVersion(uid)
	return s, ok
}

// StatusVersion is Status with the status's version for SetPodStatusAt.
func (m *Manager) StatusVersion(uid types.UID) (v1.PodStatus, uint64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.entries[uid]; e != nil {
		return e.status, e.version, true
	}
	return v1.PodStatus{}, 0, false
}

func (m *Manager) markDirty() {
	select {
	case m.dirty <- struct{}{}:
	default:
	}
}

// Run reports statuses until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	t := m.clock.NewTicker(m.period)
	defer t.Stop()
	for {
		reconcile := false
		select {
		case <-ctx.Done():
			return
		case <-m.dirty:
		case <-t.C():
			reconcile = true
		}
		m.syncAll(ctx, reconcile)
	}
}

// syncAll reports every status that is not yet in the apiserver and deletes
// pods that may go; with reconcile (the periodic pass, as upstream) it also
// re-reports statuses others changed. Requests run a few at a time so one
// slow pod does not hold up the rest.
func (m *Manager) syncAll(ctx context.Context, reconcile bool) {
	m.mu.Lock()
	var todo []types.UID
	for uid, e := range m.entries {
		if !e.deleted && (e.synced < e.version || m.mayDelete(e) || reconcile && m.drifted(e)) {
			todo = append(todo, uid)
		}
	}
	m.mu.Unlock()
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, uid := range todo {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			m.syncPod(ctx, uid)
		}()
	}
	wg.Wait()
}

// mayDelete: the pod was deleted, nothing of it runs, its final status is in.
func (m *Manager) mayDelete(e *entry) bool {
	return e.terminated && e.pod.DeletionTimestamp != nil && e.synced == e.version
}

// drifted reports whether the apiserver holds a status other than the
// one last reported — e.g. the node lifecycle controller marked the pod
// NotReady while Skiff could not reach the apiserver. Upstream reconciles
// these too; here it costs no request, the informer's copy is at hand.
func (m *Manager) drifted(e *entry) bool {
	target, ok := m.pods.Latest(e.pod)
	if !ok {
		return false
	}
	target = newer(target, e.patched)
	return !equalIgnoringTimes(target.Status, mergeStatus(target.Status, e.status))
}

// newer returns whichever of two copies of a pod the apiserver wrote last.
func newer(a, b *v1.Pod) *v1.Pod {
	if a == nil {
		return b
	}
	if b == nil || a.UID != b.UID {
		return a
	}
	ra, _ := strconv.ParseUint(a.ResourceVersion, 10, 64)
	rb, _ := strconv.ParseUint(b.ResourceVersion, 10, 64)
	if rb > ra {
		return b
	}
	return a
}
