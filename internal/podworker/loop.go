package podworker

import (
	"context"
	"time"

	"k8s.io/klog/v2"
)

// run is a pod's goroutine: wait for a reason to sync, sync, repeat.
func (w *Workers) run(ctx context.Context, wk *worker) {
	defer w.wg.Done()
	defer close(wk.done)
	if wk.previous != nil {
		select {
		case <-wk.previous.done:
		case <-ctx.Done():
			return
		}
	}
	var lastSync time.Time
	timer := w.cfg.Clock.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wk.wake:
		case <-timer.C():
		}
		w.mu.Lock()
		pod, phase, grace := wk.pod, wk.phase, wk.grace
		// Pokes happen under w.mu after the change they announce: one
		// still pending is covered by what was just read, so drop it
		// rather than sync again for it.
		select {
		case <-wk.wake:
		default:
		}
		w.mu.Unlock()

		st, err := w.cfg.Cache.GetNewerThan(ctx, wk.ref.UID, lastSync)
		if ctx.Err() != nil {
			return
		}
		logger := klog.FromContext(ctx).WithValues("pod", klog.KRef(wk.ref.Namespace, wk.ref.Name), "podUID", wk.ref.UID)
		next := w.cfg.Resync
		switch {
		case err != nil:
			logger.Error(err, "Pod status is not available, will retry")
			next = w.cfg.ErrorBackOff
		case phase == Syncing:
			sctx := w.beginSync(ctx, wk)
			terminal, requeue, err := w.cfg.Handler.SyncPod(sctx, pod, st)
			cut := sctx.Err() != nil && ctx.Err() == nil
			w.endSync(wk)
			switch {
			case terminal:
				w.setPhase(wk, Syncing, Terminating)
				next = 0
			case cut:
				next = 0 // cut short: the pod is terminating
			case err != nil:
				logger.Error(err, "Sync of pod failed, will retry")
				next = w.cfg.ErrorBackOff
			}
			if requeue > 0 && requeue < next {
				next = requeue
			}
		case phase == Terminating:
			if err := w.cfg.Handler.SyncTerminatingPod(ctx, pod, st, grace); err != nil {
				logger.Error(err, "Stopping pod failed, will retry")
				next = w.cfg.ErrorBackOff
			} else {
				w.setPhase(wk, Terminating, Terminated)
				next = 0
			}
		case phase == Terminated:
			if w.isRemoved(wk) {
				if err := w.cfg.Handler.SyncTerminatedPod(ctx, pod, st); err != nil {
					logger.Error(err, "Cleaning up pod failed, will retry")
					next = w.cfg.ErrorBackOff
				} else if w.forget(wk) {
					logger.V(2).Info("Pod cleaned up")
					return
				}
			} else {
				next = -1 // idle until removed
			}
		}
		// The next sync waits for a status observed after this one ended,
		// so it sees what this one did (upstream sets lastSyncTime here).
		lastSync = w.cfg.Clock.Now()
		if next >= 0 {
			timer.Reset(next)
		}
	}
}

// beginSync returns the context of a SyncPod, which ends when the pod
// must stop (Terminate, Remove) or ctx ends.
func (w *Workers) beginSync(ctx context.Context, wk *worker) context.Context {
	sctx, cancel := context.WithCancel(ctx)
	w.mu.Lock()
	defer w.mu.Unlock()
	wk.cancelSync = cancel
	if wk.phase != Syncing {
		cancel() // it changed since the loop read it
	}
	return sctx
}

func (w *Workers) endSync(wk *worker) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if wk.cancelSync != nil {
		wk.cancelSync()
		wk.cancelSync = nil
	}
}

func (w *Workers) setPhase(wk *worker, from, to Phase) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if wk.phase == from {
		wk.phase = to
	}
}

func (w *Workers) isRemoved(wk *worker) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return wk.removed
}

// forget drops a removed pod's worker, unless it was wanted again meanwhile.
func (w *Workers) forget(wk *worker) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !wk.removed {
		return false
	}
	delete(w.workers, wk.ref.UID)
	return true
}
