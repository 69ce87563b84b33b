package podruntime

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// Removing a pod's stopped sandboxes is deferred by Config.SandboxRemovalDelay
// and done by RunSandboxRemover, as upstream leaves them to its container
// GC (every minute). Removing each sandbox right after stopping it made a
// few of the sandboxes being started meanwhile take seconds longer in
// containerd: in the churn benchmark (bench workload d) the sandbox phase's
// p99 was 7.3 s with removal at once and 1.7 s with it a minute later.

// removalQueue holds sandboxes waiting to be removed.
type removalQueue struct {
	mu  sync.Mutex
	due map[string]pendingRemoval // by sandbox ID
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

// take returns the sandboxes due by now, by ID, and forgets them.
func (q *removalQueue) take(now time.Time) map[string]pendingRemoval {
	q.mu.Lock()
	defer q.mu.Unlock()
	taken := map[string]pendingRemoval{}
	for id, r := range q.due {
		if !r.at.After(now) {
			taken[id] = r
			delete(q.due, id)
		}
	}
	return taken
}

func (q *removalQueue) hasPod(pod types.UID) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, r := range q.due {
		if r.pod == pod {
			return true
		}
	}
	return false
}

// RemovingSandboxes reports whether sandboxes of the pod wait for removal:
// the pod is cleaned up and must not be taken for an orphan meanwhile.
func (m *Manager) RemovingSandboxes(pod types.UID) bool {
	return m.removals.hasPod(pod)
}

// RunSandboxRemover removes deferred sandboxes once they are due, until ctx
// ends. Sandboxes still queued then are found again after a restart: their
// pod is an orphan, stopped and removed anew.
func (m *Manager) RunSandboxRemover(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			m.removeDue(ctx, now)
		}
	}
}

func (m *Manager) removeDue(ctx context.Context, now time.Time) {
	for id, r := range m.removals.take(now) {
		if err := m.cfg.CRI.Runtime.RemovePodSandbox(ctx, id); err != nil && !isNotFound(err) {
			if ctx.Err() == nil {
				klog.ErrorS(err, "Failed to remove pod sandbox, will retry", "podUID", r.pod, "sandbox", id)
			}
			m.removals.add(r.pod, id, now.Add(m.cfg.SandboxRemovalDelay))
			continue
		}
		klog.V(4).InfoS("Removed pod sandbox", "podUID", r.pod, "sandbox", id)
	}
}
