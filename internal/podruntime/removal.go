package podruntime

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/cri"
)

// Removing a pod's stopped sandboxes is deferred by Config.SandboxRemovalDelay
// and done by RunSandboxRemover, as upstream leaves them to its container
// GC (every minute). Removing each sandbox right after stopping it made a
// few of the sandboxes being started meanwhile take seconds longer in
// containerd: in the churn benchmark (bench workload d) the sandbox phase's
// p99 was 7.3 s with removal at once and 1.7 s with it a minute later.

// doneKept bounds how long a finished removal is remembered: the PLEG
// relists every second, and one this far behind is unhealthy anyway.
const doneKept = 5 * time.Minute

// removalQueue holds sandboxes waiting to be removed, being removed, and
// when each pod's last removal finished.
type removalQueue struct {
	mu       sync.Mutex
	due      map[string]pendingRemoval // by sandbox ID
	removing map[string]types.UID      // taken by take, not yet finished
	done     map[types.UID]time.Time   // pod → its last removal's end
}

type pendingRemoval struct {
	pod types.UID
	at  time.Time
}

func (q *removalQueue) add(pod types.UID, sandboxID string, at time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.due == nil {
		q.due = map[string]pendingRemoval{}
	}
	if _, ok := q.due[sandboxID]; !ok {
		q.due[sandboxID] = pendingRemoval{pod: pod, at: at}
	}
}

// take returns the sandboxes due by now, by ID; each stays the pod's
// until finish.
func (q *removalQueue) take(now time.Time) map[string]pendingRemoval {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.removing == nil {
		q.removing = map[string]types.UID{}
	}
	taken := map[string]pendingRemoval{}
	for id, r := range q.due {
		if !r.at.After(now) {
			taken[id] = r
			q.removing[id] = r.pod
			delete(q.due, id)
		}
	}
	for pod, at := range q.done {
		if now.Sub(at) > doneKept {
			delete(q.done, pod)
		}
	}
	return taken
}

// finish records that a taken sandbox was removed (or queued again).
func (q *removalQueue) finish(sandboxID string, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	pod, ok := q.removing[sandboxID]
	if !ok {
		return
	}
	delete(q.removing, sandboxID)
	if q.done == nil {
		q.done = map[types.UID]time.Time{}
	}
	q.done[pod] = now
}

// hasPod reports whether the pod has sandboxes queued or being removed,
// or had one removed at or after listed: a removal stamped with the same
// time as the listing (a coarse or fake clock) may have ended after it.
func (q *removalQueue) hasPod(pod types.UID, listed time.Time) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if at, ok := q.done[pod]; ok && !at.Before(listed) {
		return true
	}
	for _, r := range q.due {
		if r.pod == pod {
			return true
		}
	}
	for _, p := range q.removing {
		if p == pod {
			return true
		}
	}
	return false
}

// RemovingSandboxes reports whether sandboxes of the pod wait for
// removal or are being removed, or one was removed at or after listed (when the
// runtime was listed, e.g. by the PLEG, which then still shows it): the
// pod is cleaned up and must not be taken for an orphan.
func (m *Manager) RemovingSandboxes(pod types.UID, listed time.Time) bool {
	return m.removals.hasPod(pod, listed)
}

// RunSandboxRemover removes deferred sandboxes once they are due, until ctx
// ends. Sandboxes still queued then are found again after a restart: their
// pod is an orphan, stopped and removed anew.
func (m *Manager) RunSandboxRemover(ctx context.Context, period time.Duration) {
	t := m.cfg.Clock.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C():
			m.removeDue(ctx, now)
		}
	}
}

func (m *Manager) removeDue(ctx context.Context, now time.Time) {
	for id, r := range m.removals.take(now) {
		err := m.cfg.CRI.Runtime.RemovePodSandbox(ctx, id)
		if err != nil && !cri.IsNotFound(err) {
			if ctx.Err() == nil {
				klog.ErrorS(err, "Failed to remove pod sandbox, will retry", "podUID", r.pod, "sandbox", id)
			}
			m.removals.add(r.pod, id, now.Add(m.cfg.SandboxRemovalDelay))
		} else {
			klog.V(4).InfoS("Removed pod sandbox", "podUID", r.pod, "sandbox", id)
		}
		// The clock, not now: removing many sandboxes takes a while.
		m.removals.finish(id, m.cfg.Clock.Now())
	}
}
