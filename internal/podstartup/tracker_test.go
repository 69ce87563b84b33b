package podstartup

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	testclock "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/metrics"
)

type fakeClock = testclock.FakeClock

func newClock() *fakeClock {
	return testclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
}

func pod(uid string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "ns", UID: types.UID(uid)},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "main"}}},
	}
}
func (r *fakeRecorder) count() int        { return len(r.events) }
func (r *fakeRecorder) last() string      { return r.events[len(r.events)-1] }
func (r *fakeRecorder) reasons() []string { return r.reasonList }
func newTracker(c *fakeClock, rec Recorder, reg *metrics.Registry) *Tracker {
	return New(Config{Metrics: reg, Events: rec, Clock: c})
}

// statusOf is a pod status with containers running or waiting, Ready
// when all run.
func statusOf(running ...bool) *v1.PodStatus {
	st := &v1.PodStatus{}
	ready := v1.ConditionTrue
	for _, r := range running {
		cs := v1.ContainerStatus{}
		if r {
			cs.State.Running = &v1.ContainerStateRunning{}
		} else {
			cs.State.Waiting = &v1.ContainerStateWaiting{Reason: "ContainerCreating"}
			ready = v1.ConditionFalse
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	st.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: ready}}
	return st
}

// readied reports the pod Ready, its one container running.
func readied(tr *Tracker, p *v1.Pod) { tr.Status(p, statusOf(true)) }

type fakeRecorder struct {
	events     []string
	reasonList []string
}

func (r *fakeRecorder) Eventf(_ runtime.Object, eventtype, reason, format string, args ...interface{}) {
	r.events = append(r.events, eventtype+" "+fmt.Sprintf(format, args...))
	r.reasonList = append(r.reasonList, reason)
}

// start walks a pod through a typical start: 1 ms admission, 5 ms queue,
// 2 ms volumes, 300 ms sandbox, then image/create/start of "main".
func start(c *fakeClock, tr *Tracker, uid types.UID) {
	tr.Seen(uid)
	c.Step(time.Millisecond)
	tr.Admitted(uid, time.Millisecond)
	c.Step(5 * time.Millisecond)
	tr.SyncStarted(uid)
	c.Step(2 * time.Millisecond)
	tr.Observe(uid, Volumes, "", 2*time.Millisecond)
	c.Step(300 * time.Millisecond)
	tr.Observe(uid, Sandbox, "", 300*time.Millisecond)
	c.Step(3 * time.Millisecond)
	tr.Observe(uid, Image, "main", 3*time.Millisecond)
	c.Step(40 * time.Millisecond)
	tr.Observe(uid, Create, "main", 40*time.Millisecond)
	c.Step(60 * time.Millisecond)
	tr.Observe(uid, Start, "main", 60*time.Millisecond)
}

func TestBreakdownEvent(t *testing.T) {
	c, rec := newClock(), &fakeRecorder{}
	m := metrics.New()
	reg := m.Gatherers()
	tr := newTracker(c, rec, m)
	p := pod("a")
	start(c, tr, p.UID)
	c.Step(100 * time.Millisecond)
	readied(tr, p)
	readied(tr, p) // only the first Ready counts

	if rec.count() != 1 || rec.reasons()[0] != EventReason {
		t.Fatalf("want one %s event, got %v %v", EventReason, rec.reasons(), rec.events)
	}
	want := "Normal Pod started in 511ms: admission=1ms queue=5ms volumes=2ms sandbox=300ms image(main)=3ms create(main)=40ms start(main)=60ms readiness=100ms"
	if rec.last() != want {
		t.Errorf("event:\n got %s\nwant %s", rec.last(), want)
	}
	// Every phase went to the histogram once, and the total once.
	if n := seriesCount(t, reg, "skiff_pod_startup_phase_duration_seconds"); n != 8 {
		t.Errorf("phase series = %d, want 8", n)
	}
	if got := histogramCount(t, reg, "skiff_pod_startup_duration_seconds"); got != 1 {
		t.Errorf("total observations = %d, want 1", got)
	}
	if got := histogramCount(t, reg, "skiff_pod_startup_phase_duration_seconds"); got != 8 {
		t.Errorf("phase observations = %d, want 8", got)
	}

	// After Ready, a container restart is not start-up.
	tr.Observe(p.UID, Start, "main", time.Second)
	if got := histogramCount(t, reg, "skiff_pod_startup_phase_duration_seconds"); got != 8 {
		t.Errorf("phase observations after Ready = %d, want still 8", got)
	}
}

func seriesCount(t *testing.T, g prometheus.Gatherer, name string) int {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.GetMetric())
		}
	}
	return 0
}

func histogramCount(t *testing.T, g prometheus.Gatherer, name string) uint64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			n += m.GetHistogram().GetSampleCount()
		}
	}
	return n
}

func TestTrackerCases(t *testing.T) {
	tests := []struct {
		name       string
		events     bool
		run        func(c *fakeClock, tr *Tracker, p *v1.Pod)
		wantEvents int
		wantPrefix string
	}{
		{
			name:       "events off: histograms only",
			events:     false,
			run:        func(c *fakeClock, tr *Tracker, p *v1.Pod) { start(c, tr, p.UID); readied(tr, p) },
			wantEvents: 0,
		},
		{
			name:   "adopted pod (nothing started) gets no event",
			events: true,
			run: func(c *fakeClock, tr *Tracker, p *v1.Pod) {
				tr.Seen(p.UID)
				tr.SyncStarted(p.UID)
				readied(tr, p)
			},
			wantEvents: 0,
		},
		{
			name:   "never seen: ignored",
			events: true,
			run: func(c *fakeClock, tr *Tracker, p *v1.Pod) {
				tr.Observe(p.UID, Sandbox, "", time.Second)
				readied(tr, p)
			},
			wantEvents: 0,
		},
		{
			name:   "forgotten before Ready: no event",
			events: true,
			run: func(c *fakeClock, tr *Tracker, p *v1.Pod) {
				start(c, tr, p.UID)
				tr.Forget(p.UID)
				readied(tr, p)
			},
			wantEvents: 0,
		},
		{
			name:   "static pod: queue counts from first seen; retries add up",
			events: true,
			run: func(c *fakeClock, tr *Tracker, p *v1.Pod) {
				tr.Seen(p.UID)
				c.Step(7 * time.Millisecond)
				tr.SyncStarted(p.UID)
				tr.SyncStarted(p.UID) // later syncs do not count
				tr.Observe(p.UID, Sandbox, "", 100*time.Millisecond)
				tr.Observe(p.UID, Sandbox, "", 200*time.Millisecond)
				tr.Observe(p.UID, Start, "main", 10*time.Millisecond)
				c.Step(time.Second)
				readied(tr, p)
			},
			wantEvents: 1,
			wantPrefix: "Normal Pod started in 1.007s: queue=7ms sandbox=300ms start(main)=10ms readiness=1s",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, rec := newClock(), &fakeRecorder{}
			var events Recorder
			if tt.events {
				events = rec
			}
			tr := newTracker(c, events, nil)
			p := pod("x")
			tt.run(c, tr, p)
			if rec.count() != tt.wantEvents {
				t.Fatalf("events = %v, want %d", rec.events, tt.wantEvents)
			}
			if tt.wantPrefix != "" && !strings.HasPrefix(rec.last(), tt.wantPrefix) {
				t.Errorf("event:\n got %s\nwant %s", rec.last(), tt.wantPrefix)
			}
		})
	}
}

func TestNilTracker(t *testing.T) {
	var tr *Tracker
	tr.Seen("a")
	tr.Admitted("a", time.Second)
	tr.SyncStarted("a")
	tr.Observe("a", Sandbox, "", time.Second)
	tr.Status(pod("a"), statusOf(true))
	tr.Pulled("a", time.Time{}, time.Time{})
	tr.Forget("a")
}

func TestParseMessage(t *testing.T) {
	msg := FormatMessage(1234*time.Millisecond, []entry{
		{Admission, "", 15 * time.Microsecond},
		{Sandbox, "", 640 * time.Millisecond},
		{Create, "a", 90 * time.Millisecond},
		{Create, "b", 10 * time.Millisecond},
		{Readiness, "", 2 * time.Second},
	})
	total, phases, err := ParseMessage(msg)
	if err != nil {
		t.Fatal(err)
	}
	if total != 1234*time.Millisecond {
		t.Errorf("total = %s", total)
	}
	want := map[string]time.Duration{
		"admission": 15 * time.Microsecond, "sandbox": 640 * time.Millisecond,
		"create(a)": 90 * time.Millisecond, "create(b)": 10 * time.Millisecond, "readiness": 2 * time.Second,
	}
	for k, v := range want {
		if phases[k] != v {
			t.Errorf("%s = %s, want %s (message %q)", k, phases[k], v, msg)
		}
	}
	if PhaseOf("create(b)") != "create" || PhaseOf("queue") != "queue" {
		t.Error("PhaseOf")
	}
	for _, bad := range []string{"", "Pod started in soon: x=1s", "Pod started in 1s: sandbox=fast"} {
		if _, _, err := ParseMessage(bad); err == nil {
			t.Errorf("ParseMessage(%q) accepted", bad)
		}
	}
}

// Upstream's histograms: first sight to all containers started, and
// creation to started with and without image pulls, observed once; a pod
// adopted already running is not observed.
func TestUpstreamStartDurations(t *testing.T) {
	c, m := newClock(), metrics.New()
	reg := m.Gatherers()
	tr := newTracker(c, nil, m)
	p := pod("u1")
	p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "side"})
	p.CreationTimestamp = metav1.NewTime(c.Now().Add(-2 * time.Second))

	tr.Seen(p.UID)
	c.Step(time.Second)
	tr.Status(p, statusOf(false, false))
	tr.Pulled(p.UID, c.Now(), c.Now().Add(3*time.Second))
	c.Step(4 * time.Second)
	tr.Status(p, statusOf(true, false)) // not all started yet
	c.Step(time.Second)
	tr.Status(p, statusOf(true, true))
	c.Step(3 * time.Second)
	tr.Status(p, statusOf(true, true)) // observed once only
	if n := histogramCount(t, reg, "kubelet_pod_start_duration_seconds"); n != 1 {
		t.Fatalf("observations %d, want 1", n)
	}
	if got := histogramSum(t, reg, "kubelet_pod_start_duration_seconds"); got != 6 {
		t.Errorf("start duration %v, want 6 (first seen to all started)", got)
	}
	// Created 2 s before first sight, started 6 s after, 3 s pulling.
	if got := histogramSum(t, reg, "kubelet_pod_start_total_duration_seconds"); got != 8 {
		t.Errorf("total duration %v, want 8 (creation to started)", got)
	}
	if got := histogramSum(t, reg, "kubelet_pod_start_sli_duration_seconds"); got != 5 {
		t.Errorf("SLI duration %v, want 5 (creation to started, minus pulling)", got)
	}

	adopted := pod("u2")
	tr.Seen(adopted.UID)
	tr.Status(adopted, statusOf(true))
	if n := histogramCount(t, reg, "kubelet_pod_start_duration_seconds"); n != 1 {
		t.Errorf("adopted pod observed: %d observations, want still 1", n)
	}
	tr.Forget(p.UID)
	tr.Forget(adopted.UID)
	if len(tr.pods) != 0 {
		t.Errorf("tracker keeps %d pods after Forget", len(tr.pods))
	}
}

func histogramSum(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetHistogram().GetSampleSum()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
