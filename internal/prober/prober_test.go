package prober

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	testclock "k8s.io/utils/clock/testing"
	utilexec "k8s.io/utils/exec"

	"github.com/skiff-sh/skiff/internal/action"
	"github.com/skiff-sh/skiff/internal/metrics"
)

// run runs m until ctx ends; the returned channel closes when Run has
// returned. Pods added after run returns get their workers at once.
func run(ctx context.Context, m *Manager) <-chan struct{} {
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	for {
		m.mu.Lock()
		started := m.ctx != nil
		m.mu.Unlock()
		if started {
			return done
		}
		time.Sleep(time.Millisecond)
	}
}

// settle waits until every goroutine with that function on its stack is
// blocked; then it does nothing more until something wakes it.
func settle(t *testing.T, function string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if allBlocked(string(buf[:goruntime.Stack(buf, true)]), function) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines in %s did not settle", function)
		}
	}
}

func allBlocked(stacks, function string) bool {
	for _, g := range strings.Split(stacks, "\n\n") {
		if !strings.Contains(g, function) {
			continue
		}
		header, _, _ := strings.Cut(g, "\n")
		blocked := false
		for _, state := range []string{"[select", "[chan receive", "[chan send", "[sync.Cond.Wait", "[sync.Mutex.Lock", "[semacquire"} {
			blocked = blocked || strings.Contains(header, state)
		}
		if !blocked {
			return false
		}
	}
	return true
}

type fakeStatuses struct {
	mu sync.Mutex
	m  map[types.UID]v1.PodStatus
}

func (f *fakeStatuses) Status(uid types.UID) (v1.PodStatus, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.m[uid]
	return s, ok
}

func (f *fakeStatuses) set(uid types.UID, s v1.PodStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m[uid] = s
}

// fakeExec answers each command (joined by spaces) with its exit code.
type fakeExec struct {
	mu    sync.Mutex
	exit  map[string]int
	calls map[string]int
}

func (f *fakeExec) ExecSync(_ context.Context, _ string, cmd []string, _ time.Duration) ([]byte, []byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := strings.Join(cmd, " ")
	f.calls[key]++
	if code := f.exit[key]; code != 0 {
		return []byte(key + " said no"), nil, utilexec.CodeExitError{Err: errors.New("exit"), Code: code}
	}
	return nil, nil, nil
}

func (f *fakeExec) setExit(cmd string, code int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.exit[cmd] = code
}

func (f *fakeExec) count(cmd string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[cmd]
}

type fakeRecorder struct {
	mu     sync.Mutex
	events []string
}

func (f *fakeRecorder) Eventf(_ runtime.Object, _, reason, format string, args ...interface{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, reason+": "+fmt.Sprintf(format, args...))
}

func (f *fakeRecorder) all() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.events...)
}

type fixture struct {
	t        *testing.T
	m        *Manager
	statuses *fakeStatuses
	exec     *fakeExec
	rec      *fakeRecorder
	pod      *v1.Pod
}

func execProbe(cmd string, failureThreshold int32) *v1.Probe {
	return &v1.Probe{
		ProbeHandler:     v1.ProbeHandler{Exec: &v1.ExecAction{Command: strings.Fields(cmd)}},
		PeriodSeconds:    1,
		TimeoutSeconds:   1,
		SuccessThreshold: 1,
		FailureThreshold: failureThreshold,
	}
}

func newFixture(t *testing.T, c v1.Container) *fixture {
	ctx, cancel := context.WithCancel(context.Background())
	f := &fixture{
		t:        t,
		statuses: &fakeStatuses{m: map[types.UID]v1.PodStatus{}},
		exec:     &fakeExec{exit: map[string]int{}, calls: map[string]int{}},
		rec:      &fakeRecorder{},
		pod: &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1"},
			Spec:       v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{c}},
		},
	}
	f.m = New(Config{Runtime: f.exec, Statuses: f.statuses, Recorder: f.rec})
	f.m.start = time.Time{} // no start-up jitter
	ran := run(ctx, f.m)
	t.Cleanup(func() {
		cancel()
		<-ran
	})
	// Updates are read as the kubelet would, so senders never block.
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-f.m.Updates():
			}
		}
	}()
	return f
}

// running records that the container runs with that ID, started or not.
func (f *fixture) running(id string, started bool) {
	f.statuses.set(f.pod.UID, v1.PodStatus{
		Phase: v1.PodRunning, PodIP: "10.0.0.1",
		ContainerStatuses: []v1.ContainerStatus{{
			Name: "app", ContainerID: "containerd://" + id, Started: &started,
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now().Add(-time.Hour))}},
		}},
	})
}

// worker builds one worker without its goroutine, to drive it step by step.
func (f *fixture) worker(kind Kind) *worker {
	c := &f.pod.Spec.Containers[0]
	switch kind {
	case Liveness:
		return f.m.newWorker(kind, f.pod, c, c.LivenessProbe, false, f.m.liveness, Success)
	case Startup:
		return f.m.newWorker(kind, f.pod, c, c.StartupProbe, false, f.m.startup, Unknown)
	}
	return f.m.newWorker(kind, f.pod, c, c.ReadinessProbe, false, f.m.readiness, Failure)
}

func TestReadinessThresholds(t *testing.T) {
	c := v1.Container{Name: "app", ReadinessProbe: execProbe("ready", 2)}
	c.ReadinessProbe.SuccessThreshold = 2
	f := newFixture(t, c)
	w := f.worker(Readiness)
	ctx := context.Background()
	f.running("c1", true)
	get := func() (Result, bool) { return f.m.readiness.get("c1") }

	steps := []struct {
		exit int
		want Result
	}{
		{0, Failure}, // initial Failure; one success of two
		{0, Success}, // second success: ready
		{1, Success}, // one failure of two: still ready
		{0, Success}, // the streak is broken
		{1, Success},
		{1, Failure}, // two failures in a row: not ready
	}
	for i, s := range steps {
		f.exec.setExit("ready", s.exit)
		if !w.probe(ctx) {
			t.Fatalf("step %d: worker stopped", i)
		}
		if got, _ := get(); got != s.want {
			t.Fatalf("step %d (exit %d): readiness %v, want %v", i, s.exit, got, s.want)
		}
	}
	if n := f.exec.count("ready"); n != len(steps) {
		t.Errorf("%d probes, want %d", n, len(steps))
	}
	// Every probe run is counted by result.
	for result, want := range map[string]float64{"successful": 3, "failed": 3} {
		if got := probeCount(t, f.m.cfg.Metrics, "uid-1", result); got != want {
			t.Errorf("prober_probe_total{result=%q} = %v, want %v", result, got, want)
		}
	}
}

// probeCount reads prober_probe_total of a pod's readiness probe.
func probeCount(t *testing.T, reg *metrics.Registry, uid, result string) float64 {
	t.Helper()
	families, err := reg.Gatherers().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "prober_probe_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["pod_uid"] == uid && labels["result"] == result && labels["probe_type"] == "Readiness" {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func TestStartupGatesLiveness(t *testing.T) {
	c := v1.Container{Name: "app", StartupProbe: execProbe("started", 1), LivenessProbe: execProbe("alive", 1)}
	f := newFixture(t, c)
	ctx := context.Background()
	startup, liveness := f.worker(Startup), f.worker(Liveness)
	f.exec.setExit("alive", 1) // would fail: must not run yet
	f.exec.setExit("started", 1)
	f.running("c1", false)

	liveness.probe(ctx)
	if n := f.exec.count("alive"); n != 0 {
		t.Fatalf("liveness probed %d times before startup succeeded", n)
	}
	if kind, bad := f.m.Unhealthy("c1"); bad {
		t.Fatalf("unhealthy (%s) before the liveness probe ran", kind)
	}
	f.exec.setExit("started", 0)
	startup.probe(ctx)
	if !f.m.StartupDone("c1") {
		t.Fatal("startup probe succeeded but StartupDone is false")
	}
	f.running("c1", true) // the status now says started
	startup.probe(ctx)
	if n := f.exec.count("started"); n != 1 {
		t.Errorf("startup probed %d times, want once: it stops once started", n)
	}
	liveness.probe(ctx)
	if kind, bad := f.m.Unhealthy("c1"); !bad || kind != Liveness {
		t.Fatalf("Unhealthy = %s %v after a failed liveness probe", kind, bad)
	}
	want := "Unhealthy: Liveness probe failed: alive said no"
	if ev := f.rec.all(); len(ev) == 0 || ev[len(ev)-1] != want {
		t.Errorf("events %q, want last %q", ev, want)
	}
	// On hold until the container is replaced.
	liveness.probe(ctx)
	if n := f.exec.count("alive"); n != 1 {
		t.Errorf("liveness probed %d times after failing, want 1 (on hold)", n)
	}
	f.exec.setExit("alive", 0)
	f.running("c2", true)
	liveness.probe(ctx)
	if _, bad := f.m.Unhealthy("c2"); bad {
		t.Error("the restarted container is unhealthy")
	}
	if _, ok := f.m.liveness.get("c1"); ok {
		t.Error("the old container's result was kept")
	}
	if n := f.exec.count("alive"); n != 2 {
		t.Errorf("liveness probed %d times, want 2", n)
	}
}

func TestStartupFailureKills(t *testing.T) {
	f := newFixture(t, v1.Container{Name: "app", StartupProbe: execProbe("started", 2)})
	w := f.worker(Startup)
	f.exec.setExit("started", 1)
	f.running("c1", false)
	w.probe(context.Background())
	if _, bad := f.m.Unhealthy("c1"); bad {
		t.Fatal("unhealthy after one failure of two")
	}
	w.probe(context.Background())
	if kind, bad := f.m.Unhealthy("c1"); !bad || kind != Startup {
		t.Fatalf("Unhealthy = %s %v, want Startup", kind, bad)
	}
}

func TestInitialDelay(t *testing.T) {
	c := v1.Container{Name: "app", LivenessProbe: execProbe("alive", 1)}
	c.LivenessProbe.InitialDelaySeconds = 3600 * 2
	f := newFixture(t, c)
	f.running("c1", true) // started an hour ago
	f.worker(Liveness).probe(context.Background())
	if n := f.exec.count("alive"); n != 0 {
		t.Errorf("probed %d times within initialDelaySeconds", n)
	}
}

func TestWorkerStops(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy v1.RestartPolicy
		status v1.PodStatus
		goOn   bool
	}{
		{"pod succeeded", v1.RestartPolicyAlways, v1.PodStatus{Phase: v1.PodSucceeded}, false},
		{"exited, never restarted", v1.RestartPolicyNever, exited(0), false},
		{"exited 0, OnFailure", v1.RestartPolicyOnFailure, exited(0), false},
		{"exited 1, OnFailure", v1.RestartPolicyOnFailure, exited(1), true},
		{"exited, Always", v1.RestartPolicyAlways, exited(0), true},
		{"no status yet", v1.RestartPolicyNever, v1.PodStatus{Phase: v1.PodPending}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, v1.Container{Name: "app", ReadinessProbe: execProbe("ready", 1)})
			f.pod.Spec.RestartPolicy = tc.policy
			f.statuses.set(f.pod.UID, tc.status)
			if got := f.worker(Readiness).probe(context.Background()); got != tc.goOn {
				t.Errorf("probe() = %v, want %v", got, tc.goOn)
			}
		})
	}
}

func exited(code int32) v1.PodStatus {
	return v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{
		Name: "app", ContainerID: "containerd://c1",
		State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code}},
	}}}
}

// The manager's goroutines: a readiness probe that starts passing makes
// the container ready and sends an update; RemovePod ends the workers.
func TestManagerLifecycle(t *testing.T) {
	c := v1.Container{Name: "app", ReadinessProbe: execProbe("ready", 1), LivenessProbe: execProbe("alive", 1)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	statuses := &fakeStatuses{m: map[types.UID]v1.PodStatus{}}
	exec := &fakeExec{exit: map[string]int{"ready": 1}, calls: map[string]int{}}
	m := New(Config{Runtime: exec, Statuses: statuses})
	m.start = time.Time{}
	run(ctx, m)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"}, Spec: v1.PodSpec{Containers: []v1.Container{c}}}
	started := true
	statuses.set("u", v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{
		Name: "app", ContainerID: "containerd://c1", Started: &started,
		State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.Now()}},
	}}})
	m.AddPod(pod)
	m.AddPod(pod) // idempotent
	if n := len(m.workers); n != 2 {
		t.Fatalf("%d workers, want 2", n)
	}
	if m.Ready("u", "app", "c1") {
		t.Fatal("ready before any probe succeeded")
	}
	if !m.Ready("u", "other", "c9") || !m.Started("u", "app", "c1") {
		t.Fatal("a container without readiness/startup probes must be ready and started")
	}
	exec.setExit("ready", 0)
	m.StatusStored("u") // pokes the worker
	deadline := time.After(5 * time.Second)
	for got := false; !got; {
		select {
		case u := <-m.Updates():
			got = u.Kind == Readiness && u.Result == Success && u.ContainerID == "c1" && u.PodUID == "u"
		case <-deadline:
			t.Fatal("no readiness Success update")
		}
	}
	if !m.Ready("u", "app", "c1") {
		t.Error("not ready after the update")
	}
	if n := probeSeries(t, m.cfg.Metrics, "p"); n == 0 {
		t.Error("no probe series of the pod while its workers run")
	}
	m.StopLivenessAndStartup("u")
	if n := len(m.workers); n != 1 {
		t.Errorf("%d workers after StopLivenessAndStartup, want 1", n)
	}
	m.RemovePod("u")
	done := make(chan struct{})
	go func() {
		for { // drain until the workers are gone
			select {
			case <-m.Updates():
			case <-done:
				return
			}
		}
	}()
	waited := make(chan struct{})
	go func() { m.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("workers still running after RemovePod")
	}
	close(done)
	if _, ok := m.readiness.get("c1"); ok {
		t.Error("a removed worker's result was kept")
	}
	// The pod's series went with its workers, as upstream's.
	if n := probeSeries(t, m.cfg.Metrics, "p"); n != 0 {
		t.Errorf("%d probe series of the pod left after its workers stopped", n)
	}
}

// probeSeries counts the /metrics/probes series of the pod.
func probeSeries(t *testing.T, reg *metrics.Registry, pod string) int {
	t.Helper()
	families, err := reg.Gatherers().Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "prober_") {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "pod" && l.GetValue() == pod {
					n++
				}
			}
		}
	}
	return n
}

// A readiness worker started before its container exists probes the
// container as soon as a status showing it running is stored, not a period
// (here an hour) later; a status stored again once it is ready probes
// nothing more.
func TestFirstProbeWhenStatusStored(t *testing.T) {
	probe := execProbe("ready", 1)
	probe.PeriodSeconds = 3600
	c := v1.Container{Name: "app", ReadinessProbe: probe}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	statuses := &fakeStatuses{m: map[types.UID]v1.PodStatus{}}
	exec := &fakeExec{exit: map[string]int{}, calls: map[string]int{}}
	// On a fake clock that never moves, the period never comes: only
	// StatusStored can make the worker probe.
	clk := testclock.NewFakeClock(time.Now())
	m := New(Config{Runtime: exec, Statuses: statuses, Clock: clk})
	m.start = time.Time{} // no start-up spreading
	run(ctx, m)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"}, Spec: v1.PodSpec{Containers: []v1.Container{c}}}
	statuses.set("u", v1.PodStatus{Phase: v1.PodPending, ContainerStatuses: []v1.ContainerStatus{{Name: "app"}}})
	m.AddPod(pod)
	m.StatusStored("u") // nothing to probe yet: the worker goes back to its tick

	settle(t, "created by github.com/skiff-sh/skiff/internal/prober.(*Manager).addLocked")
	started := true
	statuses.set("u", v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{
		Name: "app", ContainerID: "containerd://c1", Started: &started,
		State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(clk.Now())}},
	}}})
	m.StatusStored("u")
	deadline := time.After(5 * time.Second)
	for ready := false; !ready; {
		select {
		case u := <-m.Updates():
			ready = u.Kind == Readiness && u.Result == Success
		case <-deadline:
			t.Fatalf("no readiness Success within 5 s of the running status (probe runs: %d)", exec.count("ready"))
		}
	}
	m.StatusStored("u")
	settle(t, "created by github.com/skiff-sh/skiff/internal/prober.(*Manager).addLocked")
	if n := exec.count("ready"); n != 1 {
		t.Errorf("probe ran %d times, want once: a ready container waits for its period", n)
	}
}

// blockingExec holds every ExecSync until released and records how many
// ran at once.
type blockingExec struct {
	mu            sync.Mutex
	running, peak int
	release       chan struct{}
}

func (b *blockingExec) ExecSync(ctx context.Context, _ string, _ []string, _ time.Duration) ([]byte, []byte, error) {
	b.mu.Lock()
	b.running++
	b.peak = max(b.peak, b.running)
	b.mu.Unlock()
	select {
	case <-b.release:
	case <-ctx.Done():
	}
	b.mu.Lock()
	b.running--
	b.mu.Unlock()
	return nil, nil, nil
}

// startExecChecks runs n exec checks of containers c0..c(n-1) at once,
// check i urgent as urgent(i) says; each must end in success.
func startExecChecks(ctx context.Context, t *testing.T, m *Manager, n int, urgent func(int) bool) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &v1.Container{Name: "app"}
			if res, _, err := m.check(ctx, execProbe("ready", 1), c, "", fmt.Sprint("c", i), urgent(i)); err != nil || res != action.Success {
				t.Errorf("check: %v %v", res, err)
			}
		}()
	}
	return &wg
}

// waitRunning waits until n execs run at once.
func (b *blockingExec) waitRunning(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		b.mu.Lock()
		running := b.running
		b.mu.Unlock()
		if running == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d exec probes running, want %d", running, n)
		}
	}
}

// Exec probes of many containers run at most ExecSlots at a time; the
// rest wait their turn and still run.
func TestExecProbesCapped(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	exec := &blockingExec{release: make(chan struct{})}
	m := New(Config{Runtime: exec, Statuses: &fakeStatuses{m: map[types.UID]v1.PodStatus{}}, ExecSlots: 3})
	wg := startExecChecks(ctx, t, m, 10, func(int) bool { return false })
	exec.waitRunning(t, 3)
	settle(t, "created by github.com/skiff-sh/skiff/internal/prober.startExecChecks") // every check waits: in a slot, or for one
	for range 10 {
		exec.release <- struct{}{}
	}
	wg.Wait()
	if exec.peak != 3 {
		t.Errorf("at most %d exec probes ran at once, want 3", exec.peak)
	}
}

// A probe the pod still waits for is not held back by the cap: urgent
// exec probes all run at once even with every slot taken.
func TestUrgentExecProbesNotCapped(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	exec := &blockingExec{release: make(chan struct{})}
	m := New(Config{Runtime: exec, Statuses: &fakeStatuses{m: map[types.UID]v1.PodStatus{}}, ExecSlots: 1})
	// The routine one takes the slot; the four urgent ones run beside it.
	wg := startExecChecks(ctx, t, m, 5, func(i int) bool { return i > 0 })
	exec.waitRunning(t, 5)
	for range 5 {
		exec.release <- struct{}{}
	}
	wg.Wait()
}
