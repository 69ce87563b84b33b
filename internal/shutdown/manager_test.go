package shutdown

import (
	"context"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	testclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// fakeLogind is logind as the manager sees it: a delay it reports, the
// locks it handed out, and the signals the test sends. Reload reads the
// drop-in directory as logind would.
type fakeLogind struct {
	dir    string
	events chan bool

	mu      sync.Mutex
	delay   time.Duration
	locks   []*fakeLock
	reloads int
}

type fakeLock struct {
	mu     sync.Mutex
	closed bool
}

func (l *fakeLock) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errors.New("closed twice")
	}
	l.closed = true
	return nil
}

func (l *fakeLock) isClosed() bool { l.mu.Lock(); defer l.mu.Unlock(); return l.closed }

func (f *fakeLogind) InhibitDelayMax(context.Context) (time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.delay, nil
}

func (f *fakeLogind) Inhibit(context.Context) (io.Closer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := &fakeLock{}
	f.locks = append(f.locks, l)
	return l, nil
}

var delayLine = regexp.MustCompile(`(?m)^InhibitDelayMaxSec=(\d+)$`)

func (f *fakeLogind) Reload(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reloads++
	b, err := os.ReadFile(filepath.Join(f.dir, logindDropIn))
	if err != nil {
		return nil // logind ignores a missing drop-in
	}
	if m := delayLine.FindSubmatch(b); m != nil {
		s, _ := strconv.Atoi(string(m[1]))
		f.delay = time.Duration(s) * time.Second
	}
	return nil
}

func (f *fakeLogind) PrepareForShutdown(context.Context) (<-chan bool, error) { return f.events, nil }
func (f *fakeLogind) Close() error                                            { return nil }

// heldLocks are the locks not released, and how many were handed out.
func (f *fakeLogind) heldLocks() (held, all int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range f.locks {
		if !l.isClosed() {
			held++
		}
	}
	return held, len(f.locks)
}

// waitUntil polls cond; the deadline only stops a broken test.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never happened: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// killer records the order of kills; pods named in stuck stop only when
// unstick is closed.
type killer struct {
	mu      sync.Mutex
	order   []string
	graces  map[string]int64
	stuck   map[string]bool
	unstick chan struct{}
}

func (k *killer) kill(ctx context.Context, p *v1.Pod, grace int64) error {
	k.mu.Lock()
	k.order = append(k.order, p.Name)
	k.graces[p.Name] = grace
	stuck := k.stuck[p.Name]
	k.mu.Unlock()
	if stuck {
		select {
		case <-k.unstick:
		case <-ctx.Done():
		}
	}
	return nil
}

func (k *killer) killed() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.order...)
}

func TestShutdownStopsGroupsInOrderWithinBudgets(t *testing.T) {
	clk := testclock.NewFakeClock(time.Now())
	lg := &fakeLogind{dir: t.TempDir(), events: make(chan bool), delay: time.Minute}
	k := &killer{graces: map[string]int64{}, stuck: map[string]bool{"mid": true}, unstick: make(chan struct{})}
	defer close(k.unstick)
	pods := []*v1.Pod{
		prioPod("high", ptr.To[int32](1000), ptr.To[int64](2)),
		prioPod("mid", ptr.To[int32](100), ptr.To[int64](600)),
		prioPod("low", nil, nil),
	}
	var nodeChanges sync.WaitGroup
	nodeChanges.Add(1)
	statePath := filepath.Join(t.TempDir(), StateFile)
	var times []state
	var timesMu sync.Mutex
	m := New(Config{
		Groups:  []Group{{0, 5}, {100, 7}, {1000, 9}},
		Connect: func(context.Context) (Logind, error) { return lg, nil },
		Pods:    func() []*v1.Pod { return pods },
		Kill:    k.kill, NodeChanged: nodeChanges.Done,
		LogindConfDir: lg.dir, Clock: clk, StatePath: statePath,
		Times: func(start, end time.Time) {
			timesMu.Lock()
			times = append(times, state{start, end})
			timesMu.Unlock()
		},
	})
	t0 := clk.Now()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	defer func() { cancel(); <-done }()

	waitUntil(t, "the lock taken", func() bool { h, _ := lg.heldLocks(); return h == 1 })
	if err := m.Status(); err != nil {
		t.Fatalf("Status before a shutdown = %v, want nil", err)
	}
	lg.events <- true
	// The low group stops at once; the mid one's pod is stuck, so the
	// high group waits for the mid group's budget.
	waitUntil(t, "low, then mid killed, waiting on mid's budget", func() bool {
		return len(k.killed()) == 2 && clk.HasWaiters()
	})
	if !errors.Is(m.Status(), ErrShuttingDown) {
		t.Errorf("Status while shutting down = %v, want %v", m.Status(), ErrShuttingDown)
	}
	nodeChanges.Wait() // the node's status was asked for at once
	if got := k.killed(); got[0] != "low" || got[1] != "mid" {
		t.Fatalf("kill order = %v, want low then mid", got)
	}
	if h, _ := lg.heldLocks(); h != 1 {
		t.Fatalf("the lock was released before the high group stopped")
	}
	clk.Step(7 * time.Second)
	waitUntil(t, "the lock released after the high group", func() bool { h, _ := lg.heldLocks(); return h == 0 })
	if got, want := k.killed(), []string{"low", "mid", "high"}; !slices.Equal(got, want) {
		t.Errorf("kill order = %v, want %v", got, want)
	}
	// Each pod gets its group's budget, or its own shorter grace period.
	if want := map[string]int64{"low": 5, "mid": 7, "high": 2}; !maps.Equal(k.graces, want) {
		t.Errorf("grace periods = %v, want %v", k.graces, want)
	}
	if lg.reloads != 0 {
		t.Errorf("logind reloaded %d times though its delay covered the budget", lg.reloads)
	}
	// The shutdown's times: in the state file, and handed to the metrics
	// (none yet at start, the start, then both).
	want := state{StartTime: t0, EndTime: t0.Add(7 * time.Second)}
	if got, err := loadState(statePath); err != nil || !got.StartTime.Equal(want.StartTime) || !got.EndTime.Equal(want.EndTime) {
		t.Errorf("state file = %+v, %v; want %+v", got, err, want)
	}
	timesMu.Lock()
	defer timesMu.Unlock()
	if len(times) != 3 || !times[0].StartTime.IsZero() || !times[1].StartTime.Equal(t0) || !times[1].EndTime.IsZero() ||
		!times[2].StartTime.Equal(want.StartTime) || !times[2].EndTime.Equal(want.EndTime) {
		t.Errorf("times = %+v, want none, the start, then %+v", times, want)
	}
}

func TestLastShutdownTimesAtStart(t *testing.T) {
	statePath := filepath.Join(t.TempDir(), StateFile)
	last := state{StartTime: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), EndTime: time.Date(2026, 1, 2, 3, 4, 25, 0, time.UTC)}
	if err := storeState(statePath, last); err != nil {
		t.Fatal(err)
	}
	lg := &fakeLogind{dir: t.TempDir(), events: make(chan bool), delay: time.Minute}
	got := make(chan state, 1)
	m := New(Config{
		Groups:  []Group{{0, 5}},
		Connect: func(context.Context) (Logind, error) { return lg, nil },
		Pods:    func() []*v1.Pod { return nil }, Kill: func(context.Context, *v1.Pod, int64) error { return nil },
		StatePath: statePath, Times: func(start, end time.Time) { got <- state{start, end} },
		Clock: testclock.NewFakeClock(time.Now()),
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	if s := <-got; !s.StartTime.Equal(last.StartTime) || !s.EndTime.Equal(last.EndTime) {
		t.Errorf("times at start = %+v, want the last shutdown's %+v", s, last)
	}
}

func TestCancelledShutdownLocksAgain(t *testing.T) {
	lg := &fakeLogind{dir: t.TempDir(), events: make(chan bool), delay: time.Minute}
	k := &killer{graces: map[string]int64{}, unstick: make(chan struct{})}
	var mu sync.Mutex
	changes := 0
	m := New(Config{
		Groups:  []Group{{0, 5}},
		Connect: func(context.Context) (Logind, error) { return lg, nil },
		Pods:    func() []*v1.Pod { return []*v1.Pod{prioPod("p", nil, nil)} },
		Kill:    k.kill, NodeChanged: func() { mu.Lock(); changes++; mu.Unlock() },
		LogindConfDir: lg.dir, Clock: testclock.NewFakeClock(time.Now()),
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()

	waitUntil(t, "the lock taken", func() bool { h, _ := lg.heldLocks(); return h == 1 })
	lg.events <- true
	waitUntil(t, "the lock released", func() bool { h, _ := lg.heldLocks(); return h == 0 })
	lg.events <- false
	waitUntil(t, "a new lock", func() bool { h, all := lg.heldLocks(); return h == 1 && all == 2 })
	if err := m.Status(); err != nil {
		t.Errorf("Status after the cancellation = %v, want nil", err)
	}
	mu.Lock()
	if changes != 2 {
		t.Errorf("node status asked for %d times, want 2 (shutdown, cancellation)", changes)
	}
	mu.Unlock()
	cancel()
	<-done
	if h, _ := lg.heldLocks(); h != 0 {
		t.Errorf("%d locks held after Run returned, want none", h)
	}
}

func TestShortInhibitDelayIsRaisedByDropIn(t *testing.T) {
	for _, tc := range []struct {
		name       string
		readOnly   bool // the drop-in has no effect
		wantLocked bool
	}{
		{"logind applies the drop-in", false, true},
		{"logind keeps its delay: no lock", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			lg := &fakeLogind{dir: dir, events: make(chan bool), delay: 3 * time.Second}
			if tc.readOnly {
				lg.dir = t.TempDir() // reads elsewhere
			}
			clk := testclock.NewFakeClock(time.Now())
			m := New(Config{
				Groups:        []Group{{0, 20}, {1000, 10}},
				Connect:       func(context.Context) (Logind, error) { return lg, nil },
				Pods:          func() []*v1.Pod { return nil },
				Kill:          func(context.Context, *v1.Pod, int64) error { return nil },
				LogindConfDir: dir, Clock: clk,
			})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); m.Run(ctx) }()
			defer func() { cancel(); <-done }()
			if tc.wantLocked {
				waitUntil(t, "the lock taken", func() bool { h, _ := lg.heldLocks(); return h == 1 })
			} else {
				// Step the clock past the wait for logind; Run gives up.
				for stepped := false; !stepped; {
					select {
					case <-done:
						stepped = true
					default:
						clk.Step(time.Second)
						time.Sleep(time.Millisecond)
					}
				}
				if _, all := lg.heldLocks(); all != 0 {
					t.Errorf("a lock was taken though logind's delay stayed below the budget")
				}
			}
			b, err := os.ReadFile(filepath.Join(dir, logindDropIn))
			if err != nil {
				t.Fatal(err)
			}
			if want := "# Kubelet logind override\n[Login]\nInhibitDelayMaxSec=30\n"; string(b) != want {
				t.Errorf("drop-in = %q, want %q", b, want)
			}
			if lg.reloads == 0 {
				t.Error("logind was not asked to reload")
			}
		})
	}
}

func TestNoLogindGivesUp(t *testing.T) {
	tries := 0
	m := New(Config{
		Groups:  []Group{{0, 5}},
		Connect: func(context.Context) (Logind, error) { tries++; return nil, errors.New("no system bus") },
		Pods:    func() []*v1.Pod { return nil }, Kill: func(context.Context, *v1.Pod, int64) error { return nil },
		Clock: testclock.NewFakeClock(time.Now()),
	})
	m.Run(context.Background()) // returns: as upstream, no retry when logind was never reached
	if tries != 1 || m.Status() != nil {
		t.Errorf("tries = %d, Status = %v; want 1 and nil", tries, m.Status())
	}
}

// A bus connection lost after start is made again, with a new lock.
func TestLostBusReconnects(t *testing.T) {
	clk := testclock.NewFakeClock(time.Now())
	first := &fakeLogind{events: make(chan bool), delay: time.Minute}
	second := &fakeLogind{events: make(chan bool), delay: time.Minute}
	var mu sync.Mutex
	buses := []*fakeLogind{first, second}
	m := New(Config{
		Groups: []Group{{0, 5}},
		Connect: func(context.Context) (Logind, error) {
			mu.Lock()
			defer mu.Unlock()
			if len(buses) == 0 {
				return nil, errors.New("no more")
			}
			b := buses[0]
			buses = buses[1:]
			return b, nil
		},
		Pods: func() []*v1.Pod { return nil }, Kill: func(context.Context, *v1.Pod, int64) error { return nil },
		Clock: clk,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitUntil(t, "the first lock", func() bool { h, _ := first.heldLocks(); return h == 1 })
	close(first.events) // the connection ended
	waitUntil(t, "the wait before reconnecting", clk.HasWaiters)
	if h, _ := first.heldLocks(); h != 0 {
		t.Errorf("the lock of the lost connection is still held")
	}
	clk.Step(reconnectPeriod)
	waitUntil(t, "a lock on the new connection", func() bool { h, _ := second.heldLocks(); return h == 1 })
}

func TestNoGroupsNoLogind(t *testing.T) {
	connected := false
	m := New(Config{Connect: func(context.Context) (Logind, error) { connected = true; return nil, errors.New("no") }})
	m.Run(context.Background()) // returns at once
	if connected {
		t.Error("connected to logind with graceful shutdown off")
	}
}
