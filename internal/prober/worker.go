package prober

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/cri"
	"github.com/skiff-sh/skiff/internal/metrics"
)

// worker probes one container of a pod with one probe, every periodSeconds,
// until its context ends or the container will never run again. It
// follows the container across restarts: a new container ID starts over
// from the kind's initial result.
type worker struct {
	m       *Manager
	kind    Kind
	pod     *v1.Pod
	c       *v1.Container
	spec    *v1.Probe
	isInit  bool
	results *results
	initial Result
	trigger chan struct{} // a probe now, not at the next tick
	cancel  context.CancelFunc
	target  metrics.ProbeTarget

	// probedCurrent says whether the container the worker follows has been
	// probed yet, succeeded whether its result is Success; the Manager reads
	// them to decide whom to poke.
	probedCurrent, succeeded atomic.Bool

	// Owned by the goroutine.
	containerID string
	last        Result
	streak      int  // how many probes in a row gave last
	onHold      bool // failed liveness or startup: wait for the next container
}

func (w *worker) run(ctx context.Context) {
	period := seconds(w.spec.PeriodSeconds)
	defer func() {
		if w.containerID != "" {
			w.results.remove(w.containerID)
		}
		w.m.dropWorker(w)
		// The probe's series go with its worker, as upstream's.
		w.m.cfg.Metrics.ForgetProbe(w.target)
	}()
	// Right after Skiff starts, spread the probes of the pods it adopts
	// over a period rather than run them all at once, as upstream.
	if period > w.m.cfg.Clock.Since(w.m.start) {
		select {
		case <-ctx.Done():
			return
		case <-w.m.cfg.Clock.After(rand.N(period)):
		}
	}
	ticker := w.m.cfg.Clock.NewTicker(period)
	defer func() { ticker.Stop() }()
	for w.probe(ctx) {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		case <-w.trigger:
			ticker.Stop()
			ticker = w.m.cfg.Clock.NewTicker(period)
		}
	}
}

// poke asks for a probe now; it never blocks.
func (w *worker) poke() {
	select {
	case w.trigger <- struct{}{}:
	default:
	}
}

// probe probes the container once, if it is time to, and records the
// result. It returns whether the worker should go on.
func (w *worker) probe(ctx context.Context) bool {
	if ctx.Err() != nil {
		return false
	}
	st, ok := w.m.cfg.Statuses.Status(w.pod.UID)
	if !ok {
		return true // no status yet
	}
	if st.Phase == v1.PodSucceeded || st.Phase == v1.PodFailed {
		return false
	}
	cs := w.status(&st)
	if cs == nil || cs.ContainerID == "" {
		return true // not created yet
	}
	if id := cri.RuntimeID(cs.ContainerID); id != w.containerID {
		if w.containerID != "" {
			w.results.remove(w.containerID)
		}
		w.containerID, w.onHold = id, false
		w.last, w.streak = Unknown, 0
		w.probedCurrent.Store(false)
		w.record(ctx, w.initial)
	}
	if w.onHold {
		return true
	}
	if cs.State.Running == nil {
		w.record(ctx, Failure)
		// Stop once the container will never run again.
		if t := cs.State.Terminated; t != nil && !w.restarts(t.ExitCode) {
			return false
		}
		return true
	}
	if w.m.cfg.Clock.Since(cs.State.Running.StartedAt.Time) < time.Duration(w.spec.InitialDelaySeconds)*time.Second {
		return true
	}
	// The startup probe runs until the container has started; liveness
	// and readiness only after that.
	started := cs.Started != nil && *cs.Started
	if started == (w.kind == Startup) {
		return true
	}
	w.probedCurrent.Store(true)
	began := w.m.cfg.Clock.Now()
	// Liveness starts at Success: only readiness and startup probes hold
	// the pod back until they succeed.
	urgent := !w.succeeded.Load()
	res, err := w.m.runProbe(ctx, w.kind, w.pod, w.c, w.spec, st.PodIP, w.containerID, urgent)
	if err != nil || ctx.Err() != nil {
		return true // could not probe: no result
	}
	switch res {
	case Success:
		w.m.cfg.Metrics.ObserveProbe(w.target, metrics.ProbeSuccessful)
		w.m.cfg.Metrics.ObserveProbeDuration(w.target, w.m.cfg.Clock.Since(began))
	default:
		w.m.cfg.Metrics.ObserveProbe(w.target, metrics.ProbeFailed)
	}
	if res == w.last {
		w.streak++
	} else {
		w.last, w.streak = res, 1
	}
	if (res == Failure && w.streak < int(max(w.spec.FailureThreshold, 1))) ||
		(res == Success && w.streak < int(max(w.spec.SuccessThreshold, 1))) {
		return true // not settled yet: keep the result as it is
	}
	w.record(ctx, res)
	if res == Failure && w.kind != Readiness {
		// The container gets killed and restarted: no more probes of it.
		w.onHold, w.streak = true, 0
	}
	return true
}

// record sets the result of the container the worker follows.
func (w *worker) record(ctx context.Context, res Result) {
	w.succeeded.Store(res == Success)
	w.results.set(ctx, w.pod.UID, w.containerID, res)
}

// status finds the container's status in the pod's.
func (w *worker) status(st *v1.PodStatus) *v1.ContainerStatus {
	list := st.ContainerStatuses
	if w.isInit {
		list = st.InitContainerStatuses
	}
	for i := range list {
		if list[i].Name == w.c.Name {
			return &list[i]
		}
	}
	return nil
}

// restarts reports whether a container that exited with code will be
// started again: a sidecar always, others as the pod's policy says.
func (w *worker) restarts(code int32) bool {
	if w.isInit { // probes on init containers: sidecars only
		return true
	}
	switch w.pod.Spec.RestartPolicy {
	case v1.RestartPolicyNever:
		return false
	case v1.RestartPolicyOnFailure:
		return code != 0
	}
	return true
}
