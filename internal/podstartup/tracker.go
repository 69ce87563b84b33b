// Package podstartup records where each pod's start-up time goes: the
// admission decision, the wait for its pod worker, volume setup, the
// sandbox, each container's image check, create and start, and the wait
// for readiness. Every phase feeds a Prometheus histogram; once the pod
// first turns Ready, its breakdown can also be emitted as one
// PodStartupBreakdown Event. The upstream kubelet only reports the totals,
// which the same Tracker records under upstream's names: first sight (or
// creation) to all containers started, image pulls left out of the SLI.
// It is the kubelet's one record of pods' starts.
package podstartup

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/metrics"
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
	// Metrics gets the start histograms; nil: a registry of its own.
	Metrics *metrics.Registry
	// Events, when set, receives one PodStartupBreakdown Event per pod.
	Events Recorder
	// Clock times the phases; nil: the real one.
	Clock clock.PassiveClock
}

// Tracker records pods' start-up phases from the moment the kubelet first
// sees a pod until it first turns Ready. A nil *Tracker records nothing.
type Tracker struct {
	cfg Config
	m   *metrics.PodStartMetrics

	mu   sync.Mutex
	pods map[types.UID]*record
}

type record struct {
	seen      time.Time
	admitted  time.Time // zero until admitted
	synced    bool      // its first sync began
	lastStart time.Time // end of the latest container start
	ran       bool      // a sandbox or container was started for it
	done      bool      // Ready was reached: nothing more is recorded
	entries   []entry

	// For upstream's histograms: whether a status was looked at since
	// first sight, whether all containers were seen started, and the
	// first pull's start and the last pull's end.
	reported, allStarted bool
	pullStart, pullEnd   time.Time
}

type entry struct {
	phase, container string
	d                time.Duration
}

// New returns a Tracker.
func New(cfg Config) *Tracker {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New()
	}
	return &Tracker{cfg: cfg, m: &cfg.Metrics.PodStart, pods: map[types.UID]*record{}}
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
		r.ran = true
	case Sandbox:
		r.ran = true
	}
	t.add(r, phase, container, d)
}

// Pulled records an image pull of the pod, from start to end: upstream's
// SLI leaves it out.
func (t *Tracker) Pulled(uid types.UID, start, end time.Time) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.pods[uid]
	if r == nil || r.allStarted {
		return
	}
	if r.pullStart.IsZero() || start.Before(r.pullStart) {
		r.pullStart = start
	}
	if end.After(r.pullEnd) {
		r.pullEnd = end
	}
}

// Status looks at the pod's newly computed status. The first time every
// app container has started it records upstream's start durations; the
// first time the pod is Ready it ends the pod's start-up and emits its
// Event. A pod adopted already running (its first status shows it
// started, nothing was started for it) is dropped without either.
func (t *Tracker) Status(pod *v1.Pod, st *v1.PodStatus) {
	if t == nil {
		return
	}
	now := t.cfg.Clock.Now()
	t.mu.Lock()
	r := t.pods[pod.UID]
	if r == nil || r.done {
		t.mu.Unlock()
		return
	}
	t.started(r, pod, st, now)
	if !ready(st) {
		t.mu.Unlock()
		return
	}
	r.done = true
	if !r.ran {
		t.mu.Unlock()
		return
	}
	if !r.lastStart.IsZero() {
		t.add(r, Readiness, "", now.Sub(r.lastStart))
	}
	total := now.Sub(r.seen)
	t.m.Ready.Observe(total.Seconds())
	entries := r.entries
	t.mu.Unlock()

	if t.cfg.Events != nil {
		t.cfg.Events.Eventf(pod, v1.EventTypeNormal, EventReason, "%s", FormatMessage(total, entries))
	}
	klog.V(3).InfoS("Pod start-up breakdown", "pod", klog.KObj(pod), "breakdown", FormatMessage(total, entries))
}

// started observes upstream's durations the first time all of the pod's
// app containers have started; t.mu is held.
func (t *Tracker) started(r *record, pod *v1.Pod, st *v1.PodStatus, now time.Time) {
	first := !r.reported
	r.reported = true
	if r.allStarted || !allStarted(pod, st) {
		return
	}
	r.allStarted = true
	if first {
		return // already running when first seen: nothing to measure
	}
	t.m.Duration.Observe(now.Sub(r.seen).Seconds())
	if created := pod.CreationTimestamp.Time; !created.IsZero() {
		total := now.Sub(created)
		t.m.TotalDuration.Observe(total.Seconds())
		t.m.SLIDuration.Observe((total - r.pullEnd.Sub(r.pullStart)).Seconds())
	}
}

func allStarted(pod *v1.Pod, st *v1.PodStatus) bool {
	if len(st.ContainerStatuses) < len(pod.Spec.Containers) {
		return false
	}
	for _, cs := range st.ContainerStatuses {
		switch {
		case cs.State.Running != nil:
		case cs.State.Terminated != nil && !cs.State.Terminated.StartedAt.IsZero():
		default:
			return false
		}
	}
	return true
}

func ready(st *v1.PodStatus) bool {
	for _, c := range st.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
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
	t.m.Phases.WithLabelValues(phase).Observe(d.Seconds())
}
