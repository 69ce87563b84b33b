// Package podstartup records where each pod's start-up time goes: the
// admission decision, the wait for its pod worker, volume setup, the
// sandbox, each container's image check, create and start, and the wait
// for readiness. Every phase feeds a Prometheus histogram; once the pod
// first turns Ready, its breakdown can also be emitted as one
// PodStartupBreakdown Event. The upstream kubelet only reports the total.
package podstartup

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Phases of a pod's start, in the order they happen.
const (
	Admission = "admission" // the admission decision
	Queue     = "queue"     // admitted → its first sync begins
	Volumes   = "volumes"   // volume setup in the first sync
	Sandbox   = "sandbox"   // pause image check, RunPodSandbox (network included), its status
	Image     = "image"     // per container: image check or pull
	Create    = "create"    // per container: CreateContainer
	Start     = "start"     // per container: StartContainer
	Readiness = "readiness" // last container started → the pod first computed Ready
)

// EventReason is the reason of the per-pod breakdown Event.
const EventReason = "PodStartupBreakdown"

// Recorder emits Events; client-go's record.EventRecorder fits.
type Recorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

// Config configures a Tracker.
type Config struct {
	// Registerer gets the histograms; nil registers nothing.
	Registerer prometheus.Registerer
	// Events, when set, receives one PodStartupBreakdown Event per pod.
	Events Recorder
	// Clock times the phases; nil: the real one.
	Clock clock.PassiveClock
}

// Tracker records pods' start-up phases from the moment the kubelet first
// sees a pod until it first turns Ready. A nil *Tracker records nothing.
type Tracker struct {
	cfg    Config
	phases *prometheus.HistogramVec
	total  prometheus.Histogram

	mu   sync.Mutex
	pods map[types.UID]*record
}

type record struct {
	seen      time.Time
	admitted  time.Time // zero until admitted
	synced    bool      // its first sync began
	lastStart time.Time // end of the latest container start
	started   bool      // a sandbox or container was started for it
	done      bool      // Ready was reached: nothing more is recorded
	entries   []entry
}

type entry struct {
	phase, container string
	d                time.Duration
}

// Buckets from 1 ms to about 65 s.
var buckets = prometheus.ExponentialBuckets(0.001, 2, 17)

// New returns a Tracker and registers its histograms.
func New(cfg Config) (*Tracker, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	t := &Tracker{
		cfg:  cfg,
		pods: map[types.UID]*record{},
		phases: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "skiff_pod_startup_phase_duration_seconds",
			Help:    "Time a pod's start spends in each phase (admission, queue, volumes, sandbox, image, create, start, readiness); per container for image, create and start.",
			Buckets: buckets,
		}, []string{"phase"}),
		total: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "skiff_pod_startup_duration_seconds",
			Help:    "Time from Skiff first seeing a pod to the pod first being Ready, as computed by Skiff (before the status reaches the apiserver).",
			Buckets: buckets,
		}),
	}
	if cfg.Registerer != nil {
		var err error
		// A second Tracker in one process (a kubelet restarted in-process,
		// as tests do) records into the histograms already registered.
		if t.phases, err = register(cfg.Registerer, t.phases); err != nil {
			return nil, err
		}
		if t.total, err = register(cfg.Registerer, t.total); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// register registers c, or returns the equal collector registered before.
func register[C prometheus.Collector](r prometheus.Registerer, c C) (C, error) {
	err := r.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, err
}

// Seen marks the first time the kubelet sees a pod; later calls are no-ops.
func (t *Tracker) Seen(uid types.UID) {
	if t == nil {
		return
	}
	now := t.cfg.Clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.pods[uid]; !ok {
		t.pods[uid] = &record{seen: now}
	}
}

// Admitted records the admission decision, which took d.
func (t *Tracker) Admitted(uid types.UID, d time.Duration) {
	if t == nil {
		return
	}
	now := t.cfg.Clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if r := t.active(uid); r != nil && r.admitted.IsZero() {
		r.admitted = now
		t.add(r, Admission, "", d)
	}
}

// SyncStarted marks the start of a pod sync; the first one ends the queue.
func (t *Tracker) SyncStarted(uid types.UID) {
	if t == nil {
		return
	}
	now := t.cfg.Clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if r := t.active(uid); r != nil && !r.synced {
		r.synced = true
		from := r.admitted
		if from.IsZero() {
			from = r.seen // static pods are not admitted
		}
		t.add(r, Queue, "", now.Sub(from))
	}
}

// Observe records that a phase of the pod (of one container, for the
// container phases) took d. Pods already Ready or never seen are ignored,
// so restarts later in a pod's life do not count as start-up.
func (t *Tracker) Observe(uid types.UID, phase, container string, d time.Duration) {
	if t == nil {
		return
	}
	now := t.cfg.Clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.active(uid)
	if r == nil {
		return
	}
	switch phase {
	case Start:
		r.lastStart = now
		r.started = true
	case Sandbox:
		r.started = true
	}
	t.add(r, phase, container, d)
}

// Ready is called whenever the pod's computed status is Ready; the first
// call ends the pod's start-up and emits its Event. A pod adopted already
// running (nothing was started for it) is dropped without either.
func (t *Tracker) Ready(pod *v1.Pod) {
	if t == nil {
		return
	}
	now := t.cfg.Clock.Now()
	t.mu.Lock()
	r := t.active(pod.UID)
	if r == nil {
		t.mu.Unlock()
		return
	}
	r.done = true
	if !r.started {
		t.mu.Unlock()
		return
	}
	if !r.lastStart.IsZero() {
		t.add(r, Readiness, "", now.Sub(r.lastStart))
	}
	total := now.Sub(r.seen)
	t.total.Observe(total.Seconds())
	entries := r.entries
	t.mu.Unlock()

	if t.cfg.Events != nil {
		t.cfg.Events.Eventf(pod, v1.EventTypeNormal, EventReason, "%s", FormatMessage(total, entries))
	}
	klog.V(3).InfoS("Pod start-up breakdown", "pod", klog.KObj(pod), "breakdown", FormatMessage(total, entries))
}

// Forget drops what is recorded of a pod (it was removed).
func (t *Tracker) Forget(uid types.UID) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pods, uid)
}

// active returns the pod's record while it is starting; t.mu is held.
func (t *Tracker) active(uid types.UID) *record {
	r := t.pods[uid]
	if r == nil || r.done {
		return nil
	}
	return r
}

// add records one phase; t.mu is held.
func (t *Tracker) add(r *record, phase, container string, d time.Duration) {
	r.entries = append(r.entries, entry{phase: phase, container: container, d: d})
	t.phases.WithLabelValues(phase).Observe(d.Seconds())
}
