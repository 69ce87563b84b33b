// Package prober runs the liveness, readiness and startup probes of pods'
// containers, one goroutine per container and probe, and keeps their
// results as upstream's prober manager does: readiness is false until a
// probe succeeds (true without a readiness probe), the startup probe gates
// the other two, and a failed liveness or startup probe marks the
// container for the runtime to kill. Every change of a result is sent on
// Updates so the pod's status follows at once.
package prober

import (
	"context"
	goruntime "runtime"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/action"
	"github.com/skiff-sh/skiff/internal/metrics"
)

// StatusSource gives the latest status computed for a pod; the status
// manager fits. Workers read containers' IDs, states and started flags
// from it.
type StatusSource interface {
	Status(uid types.UID) (v1.PodStatus, bool)
}

// Recorder emits Kubernetes Events.
type Recorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

// Config configures a Manager.
type Config struct {
	Runtime  action.Execer // runs exec probes (CRI ExecSync)
	Statuses StatusSource
	Recorder Recorder // nil: no events
	// ExecSlots caps how many routine exec probes run at once; 0 is two
	// per CPU. Each one is a runc exec, and many at once on a small node
	// thrash each other and the containers starting. A probe whose
	// success the pod still waits for (readiness not yet passed, startup)
	// is not held back: a batch of containers that start together would
	// otherwise be Ready a whole queue later, and upstream caps none.
	ExecSlots int
	// Clock times probe periods and initial delays; nil: the real one.
	Clock clock.WithTicker
	// Metrics counts probe results (/metrics/probes); nil: a registry of
	// its own.
	Metrics *metrics.Registry
}

// Manager owns the probe workers and their results.
type Manager struct {
	cfg     Config
	ctx     context.Context // Run's: parent of every worker's context; nil before
	pending []*v1.Pod       // added before Run
	closed  bool            // Run's ctx ended
	start   time.Time
	http    *action.HTTPProber
	execs   chan struct{} // a token per routine exec probe running

	liveness, readiness, startup *results
	updates                      chan Update

	wg      sync.WaitGroup
	mu      sync.Mutex
	workers map[workerKey]*worker
}

type workerKey struct {
	uid       types.UID
	container string
	kind      Kind
}

// New returns a Manager. Its workers start once Run runs.
func New(cfg Config) *Manager {
	updates := make(chan Update, 32)
	if cfg.ExecSlots <= 0 {
		cfg.ExecSlots = 2 * goruntime.NumCPU()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New()
	}
	return &Manager{
		execs:     make(chan struct{}, cfg.ExecSlots),
		cfg:       cfg,
		start:     cfg.Clock.Now(),
		http:      action.NewHTTPProber(),
		liveness:  newResults(Liveness, updates),
		readiness: newResults(Readiness, updates),
		startup:   newResults(Startup, updates),
		updates:   updates,
		workers:   map[workerKey]*worker{},
	}
}

// Updates delivers every change of a probe result.
func (m *Manager) Updates() <-chan Update { return m.updates }

// Run lets workers run until ctx ends, and returns once every worker has
// ended. Pods added before Run get their workers then.
func (m *Manager) Run(ctx context.Context) {
	m.mu.Lock()
	m.ctx = ctx
	pending := m.pending
	m.pending = nil
	m.mu.Unlock()
	for _, pod := range pending {
		m.AddPod(pod)
	}
	<-ctx.Done()
	m.mu.Lock()
	m.closed = true // AddPod adds no worker after this, so Wait sees them all
	m.mu.Unlock()
	m.Wait()
}

// Wait blocks until every worker started so far has ended.
func (m *Manager) Wait() { m.wg.Wait() }

// AddPod starts the workers of every probe of the pod's containers and
// sidecars that has none yet; calling it again is harmless.
func (m *Manager) AddPod(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctx == nil {
		m.pending = append(m.pending, pod)
		return
	}
	if m.closed || m.ctx.Err() != nil {
		return // shutting down: Run may be waiting for the workers
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			m.addLocked(pod, c, true)
		}
	}
	for i := range pod.Spec.Containers {
		m.addLocked(pod, &pod.Spec.Containers[i], false)
	}
}

func (m *Manager) addLocked(pod *v1.Pod, c *v1.Container, isInit bool) {
	for _, p := range []struct {
		kind    Kind
		spec    *v1.Probe
		results *results
		initial Result
	}{
		{Startup, c.StartupProbe, m.startup, Unknown},
		{Readiness, c.ReadinessProbe, m.readiness, Failure},
		{Liveness, c.LivenessProbe, m.liveness, Success},
	} {
		key := workerKey{pod.UID, c.Name, p.kind}
		if p.spec == nil || m.workers[key] != nil {
			continue
		}
		ctx, cancel := context.WithCancel(m.ctx)
		w := m.newWorker(p.kind, pod, c, p.spec, isInit, p.results, p.initial)
		w.cancel = cancel
		m.workers[key] = w
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			defer cancel()
			w.run(ctx)
		}()
	}
}

func (m *Manager) newWorker(kind Kind, pod *v1.Pod, c *v1.Container, spec *v1.Probe, isInit bool, r *results, initial Result) *worker {
	return &worker{
		m: m, kind: kind, pod: pod, c: c, spec: spec, isInit: isInit,
		results: r, initial: initial, trigger: make(chan struct{}, 1),
		target: metrics.ProbeTarget{ProbeType: string(kind), Namespace: pod.Namespace, Pod: pod.Name, PodUID: pod.UID, Container: c.Name},
	}
}

// StopLivenessAndStartup stops the liveness and startup probes of a pod
// being stopped: it must not be killed for failing them meanwhile.
// Readiness goes on until the pod is removed.
func (m *Manager) StopLivenessAndStartup(uid types.UID) {
	m.stop(func(k workerKey) bool { return k.uid == uid && k.kind != Readiness })
}

// RemovePod stops every probe of the pod.
func (m *Manager) RemovePod(uid types.UID) {
	m.stop(func(k workerKey) bool { return k.uid == uid })
}

func (m *Manager) stop(match func(workerKey) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, w := range m.workers {
		if match(k) {
			w.cancel()
			delete(m.workers, k)
		}
	}
}

// dropWorker forgets a worker that ended on its own.
func (m *Manager) dropWorker(w *worker) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := workerKey{w.pod.UID, w.c.Name, w.kind}
	if m.workers[key] == w {
		delete(m.workers, key)
	}
}

func (m *Manager) worker(uid types.UID, name string, kind Kind) *worker {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.workers[workerKey{uid, name, kind}]
}

// Started reports whether a running container has started: its startup
// probe succeeded, or it has none (running).
func (m *Manager) Started(uid types.UID, name, containerID string) bool {
	if r, ok := m.startup.get(containerID); ok {
		return r == Success
	}
	return m.worker(uid, name, Startup) == nil
}

// Ready reports whether a running, started container is ready: its
// readiness probe succeeded, or it has none.
func (m *Manager) Ready(uid types.UID, name, containerID string) bool {
	if r, ok := m.readiness.get(containerID); ok && r == Success {
		return true
	}
	return m.worker(uid, name, Readiness) == nil
}

// StatusStored tells the pod's workers that a new status of the pod is
// readable from the StatusSource. Workers that have not probed the
// container it shows yet, and readiness workers not ready, probe now rather
// than at their next tick: a container that just started is probed at
// once, not a period later. Calling it before the status is stored would
// let a worker read the previous one and wait out its period.
func (m *Manager) StatusStored(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, w := range m.workers {
		if k.uid != uid {
			continue
		}
		if !w.probedCurrent.Load() || (k.kind == Readiness && !w.succeeded.Load()) {
			w.poke()
		}
	}
}

// StartupDone reports whether the startup probe of the container
// succeeded.
func (m *Manager) StartupDone(containerID string) bool {
	r, ok := m.startup.get(containerID)
	return ok && r == Success
}

// Unhealthy reports whether the container failed its liveness or startup
// probe and must be killed, and which.
func (m *Manager) Unhealthy(containerID string) (Kind, bool) {
	if r, ok := m.liveness.get(containerID); ok && r == Failure {
		return Liveness, true
	}
	if r, ok := m.startup.get(containerID); ok && r == Failure {
		return Startup, true
	}
	return "", false
}
