package podworker

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	testclock "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/container"
)

// waitTimeout bounds how long a test waits for what must happen. Nothing
// waits for what must not: the workers run on a fake clock, so once they
// are all blocked (settle) nothing more happens until the test acts.
const waitTimeout = 5 * time.Second

type callKind string

const (
	syncPod     callKind = "SyncPod"
	terminating callKind = "SyncTerminatingPod"
	terminated  callKind = "SyncTerminatedPod"
)

// call is one Handler call as the fake recorded it.
type call struct {
	kind  callKind
	pod   *v1.Pod
	st    *container.PodStatus
	grace *int64
	at    time.Time
}

// fakeHandler records every call (in order, on calls) and then runs the
// behaviour the test set for that kind, if any.
type fakeHandler struct {
	calls chan call
	clock clock.PassiveClock

	mu          sync.Mutex
	sync        func(pod *v1.Pod) (bool, time.Duration, error)
	syncCtx     func(ctx context.Context) // runs first, with SyncPod's context
	terminating func(pod *v1.Pod) error
	terminated  func(pod *v1.Pod) error
}

func (h *fakeHandler) SyncPod(ctx context.Context, pod *v1.Pod, st *container.PodStatus) (bool, time.Duration, error) {
	h.calls <- call{kind: syncPod, pod: pod, st: st, at: h.clock.Now()}
	h.mu.Lock()
	f, fc := h.sync, h.syncCtx
	h.mu.Unlock()
	if fc != nil {
		fc(ctx)
	}
	if f != nil {
		return f(pod)
	}
	return false, 0, nil
}

func (h *fakeHandler) SyncTerminatingPod(_ context.Context, pod *v1.Pod, st *container.PodStatus, grace *int64) error {
	h.calls <- call{kind: terminating, pod: pod, st: st, grace: grace, at: h.clock.Now()}
	h.mu.Lock()
	f := h.terminating
	h.mu.Unlock()
	if f != nil {
		return f(pod)
	}
	return nil
}

func (h *fakeHandler) SyncTerminatedPod(_ context.Context, pod *v1.Pod, st *container.PodStatus) error {
	h.calls <- call{kind: terminated, pod: pod, st: st, at: h.clock.Now()}
	h.mu.Lock()
	f := h.terminated
	h.mu.Unlock()
	if f != nil {
		return f(pod)
	}
	return nil
}

type fixture struct {
	t      *testing.T
	ctx    context.Context
	cancel context.CancelFunc
	clock  *testclock.FakeClock
	cache  *container.Cache
	h      *fakeHandler
	w      *Workers
}

func newFixture(t *testing.T, tweak func(*Config)) *fixture {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	clk := testclock.NewFakeClock(time.Now())
	f := &fixture{t: t, ctx: ctx, cancel: cancel, clock: clk, cache: container.NewCache(), h: &fakeHandler{calls: make(chan call, 100), clock: clk}}
	cfg := Config{Handler: f.h, Cache: f.cache, Resync: time.Hour, ErrorBackOff: time.Hour, Clock: clk}
	if tweak != nil {
		tweak(&cfg)
	}
	f.w = New(cfg)
	go f.w.Run(ctx)
	t.Cleanup(func() {
		cancel()
		done := make(chan struct{})
		go func() { f.w.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(waitTimeout):
			t.Error("workers did not end after cancel")
		}
	})
	return f
}

// relist marks every pod's cached status current, as a PLEG relist does
// a moment after the last one.
func (f *fixture) relist() {
	f.clock.Step(time.Microsecond)
	f.cache.UpdateTime(f.clock.Now())
}

// relistContinuously plays a PLEG relisting every millisecond until the
// test ends, for tests that are not about waiting for fresh status.
func (f *fixture) relistContinuously() {
	go func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-f.ctx.Done():
				return
			case <-t.C:
				f.relist()
			}
		}
	}()
}

func (f *fixture) next() call {
	f.t.Helper()
	select {
	case c := <-f.h.calls:
		return c
	case <-time.After(waitTimeout):
		f.t.Fatal("timed out waiting for a handler call")
		return call{}
	}
}

// expect waits for the next handler call and checks its kind and pod UID.
func (f *fixture) expect(kind callKind, uid types.UID) call {
	f.t.Helper()
	c := f.next()
	got := types.UID("")
	if c.pod != nil {
		got = c.pod.UID
	} else if c.st != nil {
		got = c.st.ID
	}
	if c.kind != kind || got != uid {
		f.t.Fatalf("handler call = %s(%s), want %s(%s)", c.kind, got, kind, uid)
	}
	return c
}

// expectNone checks that the workers, left alone, call the handler no
// more: once every worker goroutine is blocked, only the test can wake it.
func (f *fixture) expectNone() {
	f.t.Helper()
	settle(f.t)
	select {
	case c := <-f.h.calls:
		f.t.Fatalf("unexpected handler call %s (pod %v)", c.kind, c.pod != nil)
	default:
	}
}

// settle waits until every pod worker goroutine is blocked: in a select
// or a channel receive (waiting to be woken, for a timer, for a fresh
// status, for a predecessor, or in a handler that blocks).
func settle(t *testing.T) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(waitTimeout); ; time.Sleep(time.Millisecond) {
		if allWorkersBlocked(string(buf[:runtime.Stack(buf, true)])) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("pod workers did not settle")
		}
	}
}

func allWorkersBlocked(stacks string) bool {
	for _, g := range strings.Split(stacks, "\n\n") {
		if !strings.Contains(g, "created by github.com/skiff-sh/skiff/internal/podworker.(*Workers).goLocked") {
			continue
		}
		header, _, _ := strings.Cut(g, "\n")
		if !strings.Contains(header, "[select") && !strings.Contains(header, "[chan receive") {
			return false
		}
	}
	return true
}

// waitGone waits until the pod has no worker.
func (f *fixture) waitGone(uid types.UID) {
	f.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for f.w.Has(uid) {
		if time.Now().After(deadline) {
			f.t.Fatalf("worker of %s still there", uid)
		}
		time.Sleep(time.Millisecond)
	}
}

func newPod(uid, name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: name, Namespace: "ns"}}
}

func ref(p *v1.Pod) container.PodRef {
	return container.PodRef{UID: p.UID, Name: p.Name, Namespace: p.Namespace}
}

func ptr[T any](v T) *T { return &v }

func TestUpdateStartsWorkerThatSyncs(t *testing.T) {
	f := newFixture(t, nil)
	p := newPod("a", "web")
	f.cache.Set(p.UID, &container.PodStatus{ID: p.UID, Name: "from-cache"}, nil, f.clock.Now())

	f.w.Update(p)
	if !f.w.Has(p.UID) {
		t.Fatal("Has after Update = false")
	}
	c := f.expect(syncPod, p.UID)
	if c.pod != p {
		t.Errorf("SyncPod got pod %p, want the updated %p", c.pod, p)
	}
	if c.st == nil || c.st.Name != "from-cache" {
		t.Errorf("SyncPod got status %+v, want the cached one", c.st)
	}
	if ph, ok := f.w.Phase(p.UID); !ok || ph != Syncing {
		t.Errorf("Phase = %v, %v; want Syncing", ph, ok)
	}
	// Nothing happens to the pod (resync is an hour away): no more syncs.
	f.relistContinuously()
	f.expectNone()
}

func TestUpdateWithNewSpecSyncsIt(t *testing.T) {
	f := newFixture(t, nil)
	f.relistContinuously()
	p1 := newPod("a", "web")
	f.w.Update(p1)
	f.expect(syncPod, "a")

	p2 := newPod("a", "web")
	p2.Generation = 2
	f.w.Update(p2)
	if c := f.expect(syncPod, "a"); c.pod != p2 {
		t.Fatalf("second SyncPod got generation %d, want the new spec", c.pod.Generation)
	}
}

func TestNotify(t *testing.T) {
	f := newFixture(t, nil)
	f.relistContinuously()
	p := newPod("a", "web")
	f.w.Update(p)
	f.expect(syncPod, "a")
	f.expectNone()

	f.w.Notify("a")
	f.expect(syncPod, "a")

	f.w.Notify("unknown") // no worker: nothing to do
	f.expectNone()
	if f.w.Has("unknown") {
		t.Fatal("Notify started a worker for an unknown pod")
	}
}

func TestSyncWaitsForStatusNewerThanLastSync(t *testing.T) {
	f := newFixture(t, nil)
	p := newPod("a", "web")
	f.w.Update(p)
	f.expectNone() // nothing in the cache is newer than "never": wait for a relist
	f.relist()
	f.expect(syncPod, "a")

	f.w.Notify("a")
	f.expectNone() // no relist since the sync
	f.relist()
	f.expect(syncPod, "a")
}

// A relist that ran while the pod was being synced may predate what the
// sync did (e.g. a container it created); the next sync must wait for one
// made after the sync ended, as upstream's lastSyncTime is taken then.
func TestSyncIgnoresStatusObservedDuringTheSync(t *testing.T) {
	f := newFixture(t, nil)
	first := true
	f.h.sync = func(*v1.Pod) (bool, time.Duration, error) {
		if first {
			first = false
			f.relist()                     // a relist lands in the middle of the sync...
			f.clock.Step(time.Millisecond) // ...and the sync goes on after it
		}
		return false, 0, nil
	}
	f.w.Update(newPod("a", "web"))
	f.relist()
	c1 := f.expect(syncPod, "a")

	f.w.Notify("a")
	f.expectNone()
	f.relist()
	c2 := f.expect(syncPod, "a")
	if !c2.at.After(c1.at.Add(time.Millisecond)) {
		t.Fatalf("second sync %v after the first: it did not wait for a relist after the first ended", c2.at.Sub(c1.at))
	}
}

func TestTerminalPodTerminatesAndIdles(t *testing.T) {
	f := newFixture(t, nil)
	f.relistContinuously()
	f.h.sync = func(*v1.Pod) (bool, time.Duration, error) { return true, 0, nil }
	p := newPod("a", "job")
	f.w.Update(p)
	f.expect(syncPod, "a")
	if c := f.expect(terminating, "a"); c.pod != p || c.grace != nil {
		t.Fatalf("SyncTerminatingPod(pod=%p, grace=%v), want the pod and no grace override", c.pod, c.grace)
	}

	// Still wanted: no cleanup, no more syncs, whatever happens.
	f.expectNone()
	f.w.Notify("a")
	f.w.Update(p)
	f.expectNone()
	if ph, ok := f.w.Phase("a"); !ok || ph != Terminated {
		t.Fatalf("Phase = %v, %v; want Terminated", ph, ok)
	}
	if !f.w.Has("a") {
		t.Fatal("the worker of a terminated but wanted pod went away")
	}

	// No longer wanted: cleaned up and forgotten.
	f.w.Remove(ref(p), ptr[int64](5))
	if c := f.expect(terminated, "a"); c.pod != p {
		t.Fatalf("SyncTerminatedPod got pod %p, want %p", c.pod, p)
	}
	f.waitGone("a")
	f.expectNone()
}

func TestRemoveTerminatesThenCleansUp(t *testing.T) {
	f := newFixture(t, nil)
	f.relistContinuously()
	p := newPod("a", "web")
	f.w.Update(p)
	f.expect(syncPod, "a")

	grace := ptr[int64](7)
	f.w.Remove(ref(p), grace)
	c := f.expect(terminating, "a")
	if c.pod != p || c.grace == nil || *c.grace != 7 {
		t.Fatalf("SyncTerminatingPod(pod=%p, grace=%v), want the pod and grace 7", c.pod, c.grace)
	}
	f.expect(terminated, "a")
	f.waitGone("a")
	if _, ok := f.w.Phase("a"); ok {
		t.Fatal("Phase of a forgotten pod: ok = true")
	}
	f.expectNone()
}

// A sync stuck (in a postStart hook, say) ends when the pod must stop, so
// its termination does not wait for it.
func TestTerminateCancelsSyncInProgress(t *testing.T) {
	for _, remove := range []bool{false, true} {
		f := newFixture(t, nil)
		f.relistContinuously()
		stuck := make(chan struct{})
		f.h.syncCtx = func(ctx context.Context) { close(stuck); <-ctx.Done() }
		p := newPod("a", "web")
		f.w.Update(p)
		f.expect(syncPod, "a")
		<-stuck
		f.h.mu.Lock()
		f.h.syncCtx = nil
		f.h.mu.Unlock()
		if remove {
			f.w.Remove(ref(p), nil)
		} else {
			f.w.Terminate(p, nil)
		}
		f.expect(terminating, "a")
	}
}

func TestRemoveOrphan(t *testing.T) {
	f := newFixture(t, nil)
	f.relistContinuously()
	orphan := container.PodRef{UID: "o", Name: "old", Namespace: "ns"}
	f.w.Remove(orphan, ptr[int64](3))
	c := f.expect(terminating, "o")
	if c.pod != nil || c.grace == nil || *c.grace != 3 {
		t.Fatalf("SyncTerminatingPod(pod=%v, grace=%v), want nil pod and grace 3", c.pod, c.grace)
	}
	if c.st == nil || c.st.ID != "o" {
		t.Fatalf("SyncTerminatingPod status = %+v, want the orphan's", c.st)
	}
	if c := f.expect(terminated, "o"); c.pod != nil {
		t.Fatalf("SyncTerminatedPod pod = %v, want nil", c.pod)
	}
	f.waitGone("o")
	f.expectNone()
}

func TestErrorsAreRetriedAfterBackOff(t *testing.T) {
	const backOff = 30 * time.Millisecond
	boom := errors.New("boom")
	tests := []struct {
		name string
		// set makes the call of the kind under test fail once.
		set   func(h *fakeHandler, fail func() error)
		start func(f *fixture, p *v1.Pod)
		steps []callKind // calls before the failing one, then the failing one
	}{
		{
			name: "SyncPod",
			set: func(h *fakeHandler, fail func() error) {
				h.sync = func(*v1.Pod) (bool, time.Duration, error) { return false, 0, fail() }
			},
			start: func(f *fixture, p *v1.Pod) { f.w.Update(p) },
			steps: []callKind{syncPod},
		},
		{
			name:  "SyncTerminatingPod",
			set:   func(h *fakeHandler, fail func() error) { h.terminating = func(*v1.Pod) error { return fail() } },
			start: func(f *fixture, p *v1.Pod) { f.w.Remove(ref(p), nil) },
			steps: []callKind{terminating},
		},
		{
			name:  "SyncTerminatedPod",
			set:   func(h *fakeHandler, fail func() error) { h.terminated = func(*v1.Pod) error { return fail() } },
			start: func(f *fixture, p *v1.Pod) { f.w.Remove(ref(p), nil) },
			steps: []callKind{terminating, terminated},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.ErrorBackOff = backOff })
			f.relistContinuously()
			var failed bool
			tt.set(f.h, func() error {
				if !failed {
					failed = true
					return boom
				}
				return nil
			})
			p := newPod("a", "web")
			tt.start(f, p)
			var c call
			for _, k := range tt.steps {
				c = f.expect(k, "a")
			}
			f.expectNone() // not before the back-off
			f.clock.Step(backOff)
			retry := f.expect(tt.steps[len(tt.steps)-1], "a")
			if d := retry.at.Sub(c.at); d < backOff {
				t.Fatalf("retried after %v, before the %v back-off", d, backOff)
			}
		})
	}
}

func TestErrorBackOffDefault(t *testing.T) {
	w := New(Config{})
	if w.cfg.ErrorBackOff != 10*time.Second {
		t.Fatalf("default ErrorBackOff = %v, want 10s", w.cfg.ErrorBackOff)
	}
}

func TestRequeueAfter(t *testing.T) {
	tests := []struct {
		name    string
		resync  time.Duration
		requeue time.Duration
		err     error
		backOff time.Duration
		minGap  time.Duration // the next sync comes no sooner
	}{
		{name: "requeue sooner than resync", resync: time.Hour, requeue: 30 * time.Millisecond, backOff: time.Hour, minGap: 30 * time.Millisecond},
		{name: "resync sooner than requeue", resync: 30 * time.Millisecond, requeue: time.Hour, backOff: time.Hour, minGap: 30 * time.Millisecond},
		{name: "requeue sooner than error back-off", resync: time.Hour, requeue: 30 * time.Millisecond, err: errors.New("boom"), backOff: time.Hour, minGap: 30 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.Resync, c.ErrorBackOff = tt.resync, tt.backOff })
			f.relistContinuously()
			f.h.sync = func(*v1.Pod) (bool, time.Duration, error) { return false, tt.requeue, tt.err }
			f.w.Update(newPod("a", "web"))
			c1 := f.expect(syncPod, "a")
			f.expectNone()
			f.clock.Step(tt.minGap)
			c2 := f.expect(syncPod, "a") // nobody notifies: only the timer can bring it
			if d := c2.at.Sub(c1.at); d < tt.minGap {
				t.Fatalf("next sync after %v, want at least %v", d, tt.minGap)
			}
		})
	}
}

// A pod with the full name of one still shutting down (an edited static
// pod manifest gives a new UID) does not start until the old one is gone.
func TestReplacementWaitsForPredecessor(t *testing.T) {
	f := newFixture(t, nil)
	f.relistContinuously()
	old := newPod("old", "web")
	f.w.Update(old)
	f.expect(syncPod, "old")

	release := make(chan struct{})
	f.h.mu.Lock() // the workers are running: set it under the lock they read it with
	f.h.terminated = func(pod *v1.Pod) error {
		if pod.UID == "old" {
			<-release
		}
		return nil
	}
	f.h.mu.Unlock()
	repl := newPod("new", "web")
	other := newPod("other", "db") // another name is not held up
	f.w.Update(repl)
	f.w.Update(other)
	f.expect(syncPod, "other")
	f.expectNone()
	if !f.w.Has("new") {
		t.Fatal("Has(new) = false: the waiting pod must have a worker")
	}

	f.w.Remove(ref(old), nil)
	f.expect(terminating, "old")
	f.expect(terminated, "old")
	f.expectNone() // old's cleanup has not finished yet
	close(release)
	f.expect(syncPod, "new")
	f.waitGone("old")
}

// A replacement removed before it ever ran still waits its turn and then
// goes through termination; its pod is never synced.
func TestReplacementRemovedWhileWaiting(t *testing.T) {
	f := newFixture(t, nil)
	f.relistContinuously()
	old := newPod("old", "web")
	f.w.Update(old)
	f.expect(syncPod, "old")

	repl := newPod("new", "web")
	f.w.Update(repl)
	f.w.Remove(ref(repl), nil)
	f.expectNone()

	f.w.Remove(ref(old), nil)
	f.expect(terminating, "old")
	f.expect(terminated, "old")
	f.expect(terminating, "new")
	f.expect(terminated, "new")
	f.waitGone("new")
}

func TestRunReturnsAfterCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	h := &fakeHandler{calls: make(chan call, 100), clock: clock.RealClock{}}
	block := make(chan struct{})
	defer close(block)
	h.sync = func(*v1.Pod) (bool, time.Duration, error) { <-block; return false, 0, nil }
	cache := container.NewCache()
	w := New(Config{Handler: h, Cache: cache, Resync: time.Hour})
	w.Update(newPod("a", "web"))                                          // waits for status: the cache never gets any
	w.Update(newPod("b", "web"))                                          // waits for a
	w.Remove(container.PodRef{UID: "o", Name: "x", Namespace: "ns"}, nil) // waits for status too

	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	settle(t)
	select {
	case <-done:
		t.Fatal("Run returned before cancel")
	default:
	}
	cancel()
	select {
	case <-done:
	case <-time.After(waitTimeout):
		t.Fatal("Run did not return after cancel")
	}
	if len(h.calls) != 0 {
		t.Fatalf("handler called %d times with no status ever available", len(h.calls))
	}
}
