// Package pleg is the pod lifecycle event generator: it relists the runtime
// every period, compares what runs with the last relist, sends an event per
// change to the affected pod's worker and refreshes the status cache of the
// pods that changed. Relisting (two CRI list calls) is cheap; full status
// reads happen only for pods with changes.
//
// When the runtime streams container events (CRI GetContainerEvents), each
// event brings its pod's status up to date at once: from the statuses the
// event carries where they are the whole pod (eventstatus.go), else by
// reading the pod. The relist becomes a safety net at EventedPeriod
// (events.go). Whichever path saw a change, the same Events come out of
// the same channel.
package pleg

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/cri"
	"github.com/skiff-sh/skiff/internal/metrics"
)

// EventType is the kind of change seen for one container or sandbox.
type EventType string

const (
	ContainerStarted EventType = "ContainerStarted"
	ContainerDied    EventType = "ContainerDied"
	ContainerRemoved EventType = "ContainerRemoved"
	ContainerChanged EventType = "ContainerChanged"
)

// Event is one change to a pod, Data being the container or sandbox ID.
type Event struct {
	ID   types.UID
	Type EventType
	Data string
}

// Runtime is what PLEG needs of the runtime: a light list of every pod,
// one pod's status read in full, and one pod's status made of the
// runtime statuses a container event carries (no read).
type Runtime interface {
	ListPods(ctx context.Context) ([]*container.Pod, error)
	GetPodStatus(ctx context.Context, ref cri.PodRef) (*container.PodStatus, error)
	PodStatusOf(ctx context.Context, ref cri.PodRef, sandboxes []*runtimeapi.PodSandboxStatus, containers []*runtimeapi.ContainerStatus) *container.PodStatus
}

// relistThreshold is how stale the last relist may be before PLEG is
// unhealthy, as upstream.
const relistThreshold = 3 * time.Minute

// PLEG relists a runtime and produces events.
type PLEG struct {
	rt            Runtime
	src           EventSource // nil: relist only
	cache         *container.Cache
	period        time.Duration
	eventedPeriod time.Duration
	clock         clock.WithTicker
	metrics       *metrics.PLEGMetrics
	events        chan *Event
	kick          chan struct{} // relist now
	decided       chan struct{} // closed once the runtime's events are known to work or not
	decideOnce    sync.Once
	offered       bool // set before decided is closed

	// syncMu orders relists and event-driven status reads, so the cache
	// and pods only ever move forward.
	syncMu sync.Mutex

	mu        sync.Mutex
	pods      map[types.UID]*container.Pod // as of the last relist or status read
	reinspect map[types.UID]bool           // status reads that failed last time
	// fresh is when each pod's view was last known current (a read
	// ended, an event's view taken), relistDone when the last relist
	// ended: an event made before either may be older than the view.
	fresh      map[types.UID]time.Time
	relistDone time.Time
	evented    bool // the event stream is healthy
	lastOK     time.Time
	lastStart  time.Time // of the previous relist, for the interval metric
}

// Config configures a PLEG.
type Config struct {
	Runtime Runtime
	Cache   *container.Cache
	Period  time.Duration // between relists
	// Events is the runtime's container event stream; nil relists only.
	Events EventSource
	// EventedPeriod is the relist period while the event stream is
	// healthy (default DefaultEventedPeriod).
	EventedPeriod time.Duration
	// Clock stamps the cache and times relists; the pod workers must read
	// the same clock. nil: the real one.
	Clock clock.WithTicker
	// Metrics gets the PLEG's metrics and the running pods and
	// containers; nil: a registry of its own.
	Metrics *metrics.Registry
}

// New returns a PLEG relisting every cfg.Period.
func New(cfg Config) *PLEG {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.EventedPeriod <= 0 {
		cfg.EventedPeriod = DefaultEventedPeriod
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New()
	}
	p := &PLEG{
		rt: cfg.Runtime, src: cfg.Events, cache: cfg.Cache, period: cfg.Period,
		eventedPeriod: cfg.EventedPeriod, clock: cfg.Clock, metrics: &cfg.Metrics.PLEG,
		events:    make(chan *Event, 1000),
		kick:      make(chan struct{}, 1),
		decided:   make(chan struct{}),
		pods:      map[types.UID]*container.Pod{},
		reinspect: map[types.UID]bool{},
		fresh:     map[types.UID]time.Time{},
	}
	if p.src == nil {
		p.decide(false)
	}
	return p
}

// Events is the channel events arrive on.
func (p *PLEG) Events() <-chan *Event { return p.events }

// Run relists every period until ctx ends, and follows the runtime's
// event stream if it has one.
func (p *PLEG) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	if p.src != nil {
		wg.Add(1)
		go func() { defer wg.Done(); p.watch(ctx) }()
	}
	for {
		// Armed before the relist: the period runs from its start.
		t := p.clock.NewTimer(p.currentPeriod())
		p.Relist(ctx)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		case <-p.kick:
			t.Stop()
		}
	}
}

// currentPeriod is the relist period: longer while events flow.
func (p *PLEG) currentPeriod() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.evented {
		return p.eventedPeriod
	}
	return p.period
}

// relistSoon makes Run relist at once.
func (p *PLEG) relistSoon() {
	select {
	case p.kick <- struct{}{}:
	default: // one is pending
	}
}

// Healthy reports an error when relisting has not succeeded recently.
func (p *PLEG) Healthy() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if since := p.clock.Since(p.lastOK); p.lastOK.IsZero() || since > relistThreshold {
		return fmt.Errorf("pleg was last seen active %v ago; threshold is %v", since.Round(time.Second), relistThreshold)
	}
	return nil
}

// LastRelist is when the last successful relist listed the runtime: what
// Pods returns is at least that recent.
func (p *PLEG) LastRelist() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastOK
}

// Pods returns the pods the runtime has, as of the last relist or a later
// status read.
func (p *PLEG) Pods() []cri.PodRef {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]cri.PodRef, 0, len(p.pods))
	for _, pod := range p.pods {
		if len(pod.Sandboxes) == 0 && len(pod.Containers) == 0 {
			continue // read as gone since the last relist
		}
		out = append(out, cri.PodRef{UID: pod.ID, Name: pod.Name, Namespace: pod.Namespace})
	}
	return out
}

// Relist lists the runtime once, updates the cache and sends events.
func (p *PLEG) Relist(ctx context.Context) {
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	ts := p.clock.Now()
	if !p.lastStart.IsZero() {
		p.metrics.RelistInterval.Observe(ts.Sub(p.lastStart).Seconds())
	}
	p.lastStart = ts
	defer func() { p.metrics.RelistDuration.Observe(p.clock.Since(ts).Seconds()) }()
	pods, err := p.rt.ListPods(ctx)
	if err != nil {
		klog.ErrorS(err, "PLEG: relist failed")
		return
	}
	current := make(map[types.UID]*container.Pod, len(pods))
	for _, pod := range pods {
		current[pod.ID] = pod
	}
	p.mu.Lock()
	old, reinspectOld := p.pods, p.reinspect
	p.mu.Unlock()

	var events []*Event
	changed := map[types.UID]*container.Pod{}
	for uid, pod := range current {
		if ev := diffPod(old[uid], pod); len(ev) > 0 || reinspectOld[uid] {
			events = append(events, ev...)
			changed[uid] = pod
		}
	}
	for uid, pod := range old {
		if _, ok := current[uid]; !ok { // gone from the runtime altogether
			events = append(events, diffPod(pod, nil)...)
			p.cache.Delete(uid)
		}
	}
	reinspect := map[types.UID]bool{}
	for uid, pod := range changed {
		ref := cri.PodRef{UID: uid, Name: pod.Name, Namespace: pod.Namespace}
		st, err := p.rt.GetPodStatus(ctx, ref)
		if err != nil {
			klog.ErrorS(err, "PLEG: reading pod status failed", "podUID", uid)
			reinspect[uid] = true
		}
		p.cache.Set(uid, st, err, ts)
	}
	p.cache.UpdateTime(ts)

	p.mu.Lock()
	p.pods, p.reinspect, p.lastOK = current, reinspect, ts
	p.fresh, p.relistDone = map[types.UID]time.Time{}, p.clock.Now()
	p.mu.Unlock()
	p.metrics.LastSeen.Set(float64(ts.Unix()))
	p.recordRunning(current)
	p.send(events)
}

func (p *PLEG) send(events []*Event) {
	for _, e := range events {
		select {
		case p.events <- e:
		default:
			p.metrics.DiscardEvents.Inc()
			klog.ErrorS(nil, "PLEG: event channel is full, dropping event", "event", e.Type, "podUID", e.ID)
		}
	}
}

// diffPod returns the events that turn pod a into pod b (either may be nil).
func diffPod(a, b *container.Pod) []*Event {
	before, after := states(a), states(b)
	var uid types.UID
	if a != nil {
		uid = a.ID
	} else {
		uid = b.ID
	}
	var out []*Event
	emit := func(t EventType, id string) { out = append(out, &Event{ID: uid, Type: t, Data: id}) }
	for id, now := range after {
		if was, ok := before[id]; !ok || was != now {
			switch now {
			case container.StateRunning:
				emit(ContainerStarted, id)
			case container.StateExited:
				emit(ContainerDied, id)
			case container.StateUnknown, container.StateCreated:
				// Upstream treats "created" as unknown: a container made but
				// not started (StartContainer failed) is a change whose
				// status must be read.
				emit(ContainerChanged, id)
			}
		}
	}
	for id, was := range before {
		if _, ok := after[id]; !ok {
			if was != container.StateExited {
				emit(ContainerDied, id)
			}
			emit(ContainerRemoved, id)
		}
	}
	return out
}

func states(p *container.Pod) map[string]container.State {
	m := map[string]container.State{}
	if p == nil {
		return m
	}
	for _, s := range p.Sandboxes {
		m[s.ID] = s.State
	}
	for _, c := range p.Containers {
		m[c.ID] = c.State
	}
	return m
}

// recordRunning sets the running pods and containers gauges from the
// PLEG's view of every pod.
func (p *PLEG) recordRunning(pods map[types.UID]*container.Pod) {
	running := 0
	byState := map[container.State]int{
		container.StateCreated: 0, container.StateRunning: 0, container.StateExited: 0, container.StateUnknown: 0,
	}
	for _, pod := range pods {
		for _, s := range pod.Sandboxes {
			if s.State == container.StateRunning {
				running++
				break
			}
		}
		for _, c := range pod.Containers {
			byState[c.State]++
		}
	}
	p.metrics.RunningPods.Set(float64(running))
	for state, n := range byState {
		p.metrics.RunningContainers.WithLabelValues(string(state)).Set(float64(n))
	}
}
