package volumemanager

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/volume/volerr"
)

// Run reconciles the actual state towards the desired one until ctx ends,
// then waits for the operations it started.
func (m *Manager) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	var timer clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		next := m.reconcile(ctx, &wg)
		var due <-chan time.Time
		if !next.IsZero() {
			d := next.Sub(m.cfg.Clock.Now())
			if timer == nil {
				timer = m.cfg.Clock.NewTimer(d)
			} else {
				timer.Stop()
				timer.Reset(d)
			}
			due = timer.C()
		}
		select {
		case <-ctx.Done():
			return
		case <-m.kick:
		case <-due:
		}
	}
}

// reconcile starts an operation for every desired volume that is not set
// up (or asks for a refresh), is not being set up, and is not backing
// off; it returns when the earliest back-off ends (zero: none).
func (m *Manager) reconcile(ctx context.Context, wg *sync.WaitGroup) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.cfg.Clock.Now()
	var next time.Time
	for uid, pod := range m.desired {
		for i := range pod.Spec.Volumes {
			vol := &pod.Spec.Volumes[i]
			k := volKey{uid, vol.Name}
			a := m.actual[k]
			if a != nil && !a.refresh && !a.expand {
				continue
			}
			op := m.ops[k]
			if op == nil {
				op = &opState{}
				m.ops[k] = op
			}
			if op.done != nil {
				continue
			}
			if now.Before(op.notBefore) {
				if next.IsZero() || op.notBefore.Before(next) {
					next = op.notBefore
				}
				continue
			}
			op.done = make(chan struct{})
			wg.Add(1)
			expandOnly := a != nil && !a.refresh
			go func() {
				defer wg.Done()
				if expandOnly {
					m.expand(ctx, pod, vol, k, op)
				} else {
					m.setUp(ctx, pod, vol, k, op)
				}
			}()
		}
	}
	return next
}

// setUp is one operation: it sets the volume up and records the outcome.
func (m *Manager) setUp(ctx context.Context, pod *v1.Pod, vol *v1.Volume, k volKey, op *opState) {
	opCtx, cancel := context.WithTimeout(ctx, m.cfg.OpTimeout)
	mounted, err := m.cfg.Mounter.SetUpVolume(opCtx, pod, vol)
	cancel()
	m.mu.Lock()
	failures := op.failures
	if err != nil {
		op.failures++
		failures = op.failures
		op.lastErr = err
		wait := backOff(op.failures)
		if _, pending := volerr.Of(err); pending {
			wait = min(wait, pendingRetry)
		}
		op.notBefore = m.cfg.Clock.Now().Add(wait)
	} else {
		op.failures, op.lastErr, op.notBefore = 0, nil, time.Time{}
		// A claim is checked for growth once it is set up too: it may
		// have grown while no pod used it.
		m.actual[k] = &actualVolume{mounted: mounted, expand: m.expands(vol)}
		for _, ch := range m.waiters[k.pod] {
			close(ch)
		}
		delete(m.waiters, k.pod)
	}
	close(op.done)
	op.done = nil
	m.mu.Unlock()
	m.poke()
	if err != nil {
		if ctx.Err() == nil {
			m.reportFailure(pod, vol, failures, err)
		}
		return
	}
	klog.V(4).InfoS("Volume set up", "pod", klog.KObj(pod), "volume", vol.Name, "hostPath", mounted.HostPath)
}

// backOff is the wait after the n-th failure in a row.
func backOff(n int) time.Duration {
	d := initialBackOff
	for i := 1; i < n && d < maxBackOff; i++ {
		d *= 2
	}
	return min(d, maxBackOff)
}
