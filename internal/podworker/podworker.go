// Package podworker runs one goroutine per pod, the only place that decides
// what to do with a pod. Each pod moves through three phases:
//
//	syncing ──(terminal, or removed from config)──► terminating ──► terminated
//
// syncing keeps the pod's containers as its spec says; terminating stops them
// within the grace period; terminated is final. A terminated pod that is
// still in the config keeps its stopped containers (status, logs); once it
// is removed from the config its containers and sandboxes are removed and
// the worker ends. A pod whose full name (namespace/name) belongs to a pod
// still shutting down waits for it, so a replaced static pod never runs
// twice at once.
//
// A sync in progress is cut short (its context cancelled) as soon as the
// pod must stop, so a pod stuck in, say, a postStart hook can be deleted.
//
// Every sync first waits for a runtime status newer than the previous sync,
// so a worker never acts on state older than its own last actions, and the
// first sync of a pod after Skiff's restart sees what already runs.
package podworker

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/container"
)

// Handler does the work of each phase. pod is nil for orphans: pods found
// in the runtime that no source knows.
type Handler interface {
	// SyncPod drives the pod towards its spec. terminal means the pod is
	// done (Succeeded or Failed) and must be stopped.
	SyncPod(ctx context.Context, pod *v1.Pod, st *container.PodStatus) (terminal bool, requeueAfter time.Duration, err error)
	// SyncTerminatingPod stops every container and sandbox of the pod.
	SyncTerminatingPod(ctx context.Context, pod *v1.Pod, st *container.PodStatus, grace *int64) error
	// SyncTerminatedPod cleans up after a pod that no source wants any more.
	SyncTerminatedPod(ctx context.Context, pod *v1.Pod, st *container.PodStatus) error
}

// Phase is where a pod is in its lifecycle.
type Phase int

const (
	Syncing Phase = iota
	Terminating
	Terminated
)

// Config configures Workers.
type Config struct {
	Handler Handler
	Cache   *container.Cache
	// Resync is how often a pod is synced with nothing happening to it
	// (upstream syncFrequency); ErrorBackOff how soon a failed sync is retried.
	Resync       time.Duration
	ErrorBackOff time.Duration
	// Clock times resyncs, back-offs and the status freshness a sync
	// waits for; it must be the clock the cache is written with. nil: the
	// real one.
	Clock clock.WithTicker
}

// Workers owns the per-pod goroutines.
type Workers struct {
	cfg Config
	wg  sync.WaitGroup

	mu      sync.Mutex
	ctx     context.Context // set by Run; nil before
	workers map[types.UID]*worker
	waiting []*worker // started before Run
}

type worker struct {
	ref      container.PodRef
	pod      *v1.Pod // latest spec; nil for orphans
	phase    Phase
	removed  bool   // no source wants it: clean up and forget once terminated
	grace    *int64 // grace period override for terminating
	wake     chan struct{}
	done     chan struct{} // closed when the goroutine ends
	previous *worker       // a pod of the same full name still shutting down

	// cancelSync ends the SyncPod in progress, if any: a pod that must stop
	// does not wait for a sync stuck in, say, a postStart hook.
	cancelSync context.CancelFunc
}

// New returns Workers. Their goroutines start once Run runs.
func New(cfg Config) *Workers {
	if cfg.ErrorBackOff <= 0 {
		cfg.ErrorBackOff = 10 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Workers{cfg: cfg, workers: map[types.UID]*worker{}}
}

// Run runs the workers until ctx ends, and returns once every worker
// goroutine has ended.
func (w *Workers) Run(ctx context.Context) {
	w.mu.Lock()
	w.ctx = ctx
	for _, wk := range w.waiting {
		w.goLocked(wk)
	}
	w.waiting = nil
	w.mu.Unlock()
	<-ctx.Done()
	w.Wait()
}

// Wait blocks until every worker goroutine has ended (after Run's ctx
// ends).
func (w *Workers) Wait() { w.wg.Wait() }

// Update sets the desired spec of a pod, starting its worker if new.
func (w *Workers) Update(pod *v1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if wk, ok := w.workers[pod.UID]; ok {
		wk.pod = pod
		wk.removed = false
		wk.poke()
		return
	}
	// Found before the goroutine starts: it reads previous unlocked.
	var previous *worker
	for _, other := range w.workers {
		if other.ref.Name == pod.Name && other.ref.Namespace == pod.Namespace {
			previous = other
		}
	}
	w.startLocked(container.PodRef{UID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}, pod, previous)
}

// Remove terminates a pod no source wants any more and forgets it once its
// containers are gone. Unknown pods (orphans) get a worker to do that.
func (w *Workers) Remove(ref container.PodRef, grace *int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wk, ok := w.workers[ref.UID]
	if !ok {
		wk = w.startLocked(ref, nil, nil)
	}
	wk.removed = true
	wk.terminateLocked(grace)
}

// Terminate stops a pod that is still wanted but must not run any more
// (the apiserver deleted it): its containers get grace seconds. The pod
// is forgotten only once Remove is called too.
func (w *Workers) Terminate(pod *v1.Pod, grace *int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wk, ok := w.workers[pod.UID]
	if !ok {
		return
	}
	wk.pod = pod
	wk.terminateLocked(grace)
}

// terminateLocked moves a syncing pod to terminating, cutting short the
// sync in progress, and wakes its goroutine.
func (wk *worker) terminateLocked(grace *int64) {
	if wk.phase == Syncing {
		wk.phase = Terminating
		wk.grace = grace
		if wk.cancelSync != nil {
			wk.cancelSync()
		}
	}
	wk.poke()
}

// Notify asks for a sync of the pod because something changed in the runtime.
func (w *Workers) Notify(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if wk, ok := w.workers[uid]; ok {
		wk.poke()
	}
}

// Has reports whether the pod has a worker.
func (w *Workers) Has(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.workers[uid]
	return ok
}

// Phase returns the pod's phase; ok is false when it has no worker.
func (w *Workers) Phase(uid types.UID) (Phase, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wk, ok := w.workers[uid]
	if !ok {
		return 0, false
	}
	return wk.phase, true
}

func (w *Workers) startLocked(ref container.PodRef, pod *v1.Pod, previous *worker) *worker {
	wk := &worker{ref: ref, pod: pod, wake: make(chan struct{}, 1), done: make(chan struct{}), previous: previous}
	w.workers[ref.UID] = wk
	if w.ctx == nil {
		w.waiting = append(w.waiting, wk)
		return wk
	}
	w.goLocked(wk)
	return wk
}

func (w *Workers) goLocked(wk *worker) {
	w.wg.Add(1)
	go w.run(w.ctx, wk)
}

func (wk *worker) poke() {
	select {
	case wk.wake <- struct{}{}:
	default:
	}
}
