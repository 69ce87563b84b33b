package podworker

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/container"
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
	var timer clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for next := time.Duration(0); ; {
		// 0: sync at once, negative: only when woken; no timer for either,
		// so that a fake clock need not move for them.
		if next != 0 {
			var tick <-chan time.Time
			if next > 0 {
				timer = resetTimer(w.cfg.Clock, timer, next)
				tick = timer.C()
			}
			select {
			case <-ctx.Done():
				return
			case <-wk.wake:
			case <-tick:
			}
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
		var done bool
		if next, done = w.syncOnce(ctx, wk, pod, phase, grace, st, err); done {
			return
		}
		// The next sync waits for a status observed after this one ended,
		// so it sees what this one did (upstream sets lastSyncTime here).
		lastSync = w.cfg.Clock.Now()
	}
}

// resetTimer makes t (nil: a new timer) fire in d, dropping a tick it
// delivered that nobody read.
func resetTimer(c clock.Clock, t clock.Timer, d time.Duration) clock.Timer {
	if t == nil {
		return c.NewTimer(d)
	}
	if !t.Stop() {
		select {
		case <-t.C():
		default:
		}
	}
	t.Reset(d)
	return t
}

// syncOnce does what the pod's phase asks with the status read (or the
// error reading it) and returns when to run again: never for a negative
// duration. done means the pod is cleaned up and its worker must end.
func (w *Workers) syncOnce(ctx context.Context, wk *worker, pod *v1.Pod, phase Phase, grace *int64, st *container.PodStatus, err error) (next time.Duration, done bool) {
	logger := klog.FromContext(ctx).WithValues("pod", klog.KRef(wk.ref.Namespace, wk.ref.Name), "podUID", wk.ref.UID)
	next = w.cfg.Resync
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
			return w.cfg.ErrorBackOff, false
		}
		w.setPhase(wk, Terminating, Terminated)
		next = 0
	case phase == Terminated:
		if !w.isRemoved(wk) {
			return -1, false // idle until removed
		}
		if err := w.cfg.Handler.SyncTerminatedPod(ctx, pod, st); err != nil {
			logger.Error(err, "Cleaning up pod failed, will retry")
			return w.cfg.ErrorBackOff, false
		}
		if w.forget(wk) {
			logger.V(2).Info("Pod cleaned up")
			return 0, true
		}
	}
	return next, false
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
