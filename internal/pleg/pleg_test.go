package pleg

import (
	"context"
	"errors"
	"fmt"
	testclock "k8s.io/utils/clock/testing"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/cri"
)

const (
	waitTimeout = 5 * time.Second
	notYet      = 50 * time.Millisecond
)

// fakeRuntime is a pleg.Runtime whose pods the test sets and whose status
// reads it records.
type fakeRuntime struct {
	mu         sync.Mutex
	pods       []*container.Pod
	listErr    error
	failStatus map[types.UID]bool
	calls      []types.UID // GetPodStatus calls, in order
	reads      int         // numbers the statuses returned
	lists      int         // ListPods calls
}

func newFakeRuntime() *fakeRuntime { return &fakeRuntime{failStatus: map[types.UID]bool{}} }

func (f *fakeRuntime) ListPods(context.Context) ([]*container.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	if f.listErr != nil {
		return nil, f.listErr
	}
	return f.pods, nil
}

func (f *fakeRuntime) GetPodStatus(_ context.Context, ref cri.PodRef) (*container.PodStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, ref.UID)
	if f.failStatus[ref.UID] {
		return nil, fmt.Errorf("status of %s: injected failure", ref.UID)
	}
	f.reads++
	// The read number goes into Name so a test can tell fresh from stale.
	st := &container.PodStatus{ID: ref.UID, Name: fmt.Sprintf("%s#%d", ref.Name, f.reads), Namespace: ref.Namespace}
	for _, p := range f.pods {
		if p.ID != ref.UID {
			continue
		}
		for _, s := range p.Sandboxes {
			state := runtimeapi.PodSandboxState_SANDBOX_NOTREADY
			if s.State == container.StateRunning {
				state = runtimeapi.PodSandboxState_SANDBOX_READY
			}
			st.Sandboxes = append(st.Sandboxes, &runtimeapi.PodSandboxStatus{Id: s.ID, State: state,
				Metadata: &runtimeapi.PodSandboxMetadata{Name: p.Name, Namespace: p.Namespace, Uid: string(p.ID)}})
		}
		for _, c := range p.Containers {
			st.Containers = append(st.Containers, &container.ContainerStatus{ID: c.ID, Name: c.Name, State: c.State})
		}
	}
	return st, nil
}

// PodStatusOf marks the status it makes "#event" in its Name, so a test
// can tell it from a read.
func (f *fakeRuntime) PodStatusOf(_ context.Context, ref cri.PodRef, sandboxes []*runtimeapi.PodSandboxStatus, containers []*runtimeapi.ContainerStatus) *container.PodStatus {
	st := &container.PodStatus{ID: ref.UID, Name: ref.Name + "#event", Namespace: ref.Namespace, Sandboxes: sandboxes}
	for _, c := range containers {
		st.Containers = append(st.Containers, &container.ContainerStatus{ID: c.Id, Name: c.GetMetadata().GetName(),
			State: container.StateFromCRI(c.State)})
	}
	return st
}

func (f *fakeRuntime) listCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lists
}

func (f *fakeRuntime) set(pods ...*container.Pod) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pods = pods
}

// takeCalls returns the sorted GetPodStatus calls since the last take.
func (f *fakeRuntime) takeCalls() []types.UID {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := append([]types.UID{}, f.calls...)
	f.calls = nil
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func pod(uid string, sandboxes []container.Instance, containers ...container.Instance) *container.Pod {
	return &container.Pod{ID: types.UID(uid), Name: uid, Namespace: "ns", Sandboxes: sandboxes, Containers: containers}
}

func sbs(in ...container.Instance) []container.Instance { return in }

func sb(id string, s container.State) container.Instance { return container.Instance{ID: id, State: s} }

func ctr(id string, s container.State) container.Instance {
	return container.Instance{ID: id, Name: "c-" + id, State: s}
}

const (
	running = container.StateRunning
	exited  = container.StateExited
	created = container.StateCreated
	unknown = container.StateUnknown
)

func ev(uid string, t EventType, id string) Event {
	return Event{ID: types.UID(uid), Type: t, Data: id}
}

// drain returns the events queued so far, sorted. Relist sends every event
// before it returns, so nothing more is coming.
func drain(p *PLEG) []Event {
	var out []Event
	for {
		select {
		case e := <-p.Events():
			out = append(out, *e)
		default:
			return sortedEvents(out...)
		}
	}
}

func sortedEvents(es ...Event) []Event {
	sort.Slice(es, func(i, j int) bool {
		a, b := es[i], es[j]
		if a.ID != b.ID {
			return a.ID < b.ID
		}
		if a.Data != b.Data {
			return a.Data < b.Data
		}
		return a.Type < b.Type
	})
	return es
}

func uids(s ...string) []types.UID {
	out := []types.UID{}
	for _, u := range s {
		out = append(out, types.UID(u))
	}
	return out
}

func TestRelistEvents(t *testing.T) {
	tests := []struct {
		name       string
		before     []*container.Pod
		after      []*container.Pod
		want       []Event
		wantStatus []types.UID // pods whose status is read on the second relist
	}{
		{
			name:       "new pod: sandbox and container started",
			after:      []*container.Pod{pod("p", sbs(sb("s1", running)), ctr("c1", running))},
			want:       sortedEvents(ev("p", ContainerStarted, "s1"), ev("p", ContainerStarted, "c1")),
			wantStatus: uids("p"),
		},
		{
			name:       "new container seen already exited",
			before:     []*container.Pod{pod("p", sbs(sb("s1", running)))},
			after:      []*container.Pod{pod("p", sbs(sb("s1", running)), ctr("c1", exited))},
			want:       sortedEvents(ev("p", ContainerDied, "c1")),
			wantStatus: uids("p"),
		},
		{
			name:       "container started",
			before:     []*container.Pod{pod("p", sbs(sb("s1", running)))},
			after:      []*container.Pod{pod("p", sbs(sb("s1", running)), ctr("c1", running))},
			want:       sortedEvents(ev("p", ContainerStarted, "c1")),
			wantStatus: uids("p"),
		},
		{
			name:       "container died",
			before:     []*container.Pod{pod("p", sbs(sb("s1", running)), ctr("c1", running))},
			after:      []*container.Pod{pod("p", sbs(sb("s1", running)), ctr("c1", exited))},
			want:       sortedEvents(ev("p", ContainerDied, "c1")),
			wantStatus: uids("p"),
		},
		{
			name:       "running container gone: died and removed",
			before:     []*container.Pod{pod("p", sbs(sb("s1", running)), ctr("c1", running))},
			after:      []*container.Pod{pod("p", sbs(sb("s1", running)))},
			want:       sortedEvents(ev("p", ContainerDied, "c1"), ev("p", ContainerRemoved, "c1")),
			wantStatus: uids("p"),
		},
		{
			name:       "exited container gone: removed only",
			before:     []*container.Pod{pod("p", sbs(sb("s1", running)), ctr("c1", exited))},
			after:      []*container.Pod{pod("p", sbs(sb("s1", running)))},
			want:       sortedEvents(ev("p", ContainerRemoved, "c1")),
			wantStatus: uids("p"),
		},
		{
			name:       "restart: old exited instance removed, new one running",
			before:     []*container.Pod{pod("p", sbs(sb("s1", running)), ctr("c1", exited))},
			after:      []*container.Pod{pod("p", sbs(sb("s1", running)), ctr("c2", running))},
			want:       sortedEvents(ev("p", ContainerRemoved, "c1"), ev("p", ContainerStarted, "c2")),
			wantStatus: uids("p"),
		},
		{
			name:       "sandbox not ready any more",
			before:     []*container.Pod{pod("p", sbs(sb("s1", running)), ctr("c1", running))},
			after:      []*container.Pod{pod("p", sbs(sb("s1", exited)), ctr("c1", running))},
			want:       sortedEvents(ev("p", ContainerDied, "s1")),
			wantStatus: uids("p"),
		},
		{
			name:       "new sandbox replaces a dead one",
			before:     []*container.Pod{pod("p", sbs(sb("s1", exited)))},
			after:      []*container.Pod{pod("p", sbs(sb("s2", running)))},
			want:       sortedEvents(ev("p", ContainerRemoved, "s1"), ev("p", ContainerStarted, "s2")),
			wantStatus: uids("p"),
		},
		{
			name:       "container state unknown: changed",
			before:     []*container.Pod{pod("p", sbs(sb("s1", running)), ctr("c1", running))},
			after:      []*container.Pod{pod("p", sbs(sb("s1", running)), ctr("c1", unknown))},
			want:       sortedEvents(ev("p", ContainerChanged, "c1")),
			wantStatus: uids("p"),
		},
		{
			// Upstream maps "created" to its unknown state, so a container
			// that was created but never started (StartContainer failed)
			// is a change and its pod's status is read.
			name:       "container created but not started: changed",
			before:     []*container.Pod{pod("p", sbs(sb("s1", running)))},
			after:      []*container.Pod{pod("p", sbs(sb("s1", running)), ctr("c1", created))},
			want:       sortedEvents(ev("p", ContainerChanged, "c1")),
			wantStatus: uids("p"),
		},
		{
			name:       "created container starts",
			before:     []*container.Pod{pod("p", sbs(sb("s1", running)), ctr("c1", created))},
			after:      []*container.Pod{pod("p", sbs(sb("s1", running)), ctr("c1", running))},
			want:       sortedEvents(ev("p", ContainerStarted, "c1")),
			wantStatus: uids("p"),
		},
		{
			name: "nothing changed: no events, no status read",
			before: []*container.Pod{
				pod("p", sbs(sb("s1", running)), ctr("c1", running), ctr("c0", exited)),
			},
			after: []*container.Pod{
				pod("p", sbs(sb("s1", running)), ctr("c0", exited), ctr("c1", running)),
			},
			wantStatus: uids(),
		},
		{
			name: "only the pod that changed is read",
			before: []*container.Pod{
				pod("p", sbs(sb("s1", running)), ctr("c1", running)),
				pod("q", sbs(sb("s2", running)), ctr("c2", running)),
			},
			after: []*container.Pod{
				pod("p", sbs(sb("s1", running)), ctr("c1", running)),
				pod("q", sbs(sb("s2", running)), ctr("c2", exited)),
			},
			want:       sortedEvents(ev("q", ContainerDied, "c2")),
			wantStatus: uids("q"),
		},
		{
			name: "pod gone from the runtime: events, no status read",
			before: []*container.Pod{
				pod("p", sbs(sb("s1", running)), ctr("c1", running), ctr("c0", exited)),
			},
			want: sortedEvents(
				ev("p", ContainerDied, "s1"), ev("p", ContainerRemoved, "s1"),
				ev("p", ContainerDied, "c1"), ev("p", ContainerRemoved, "c1"),
				ev("p", ContainerRemoved, "c0"),
			),
			wantStatus: uids(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := newFakeRuntime()
			p := New(Config{Runtime: rt, Cache: container.NewCache(), Period: time.Hour})
			ctx := context.Background()
			rt.set(tt.before...)
			p.Relist(ctx)
			drain(p)
			rt.takeCalls()

			rt.set(tt.after...)
			p.Relist(ctx)
			if got := drain(p); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("events:\n got %v\nwant %v", got, tt.want)
			}
			if got := rt.takeCalls(); !reflect.DeepEqual(got, tt.wantStatus) {
				t.Errorf("GetPodStatus calls = %v, want %v", got, tt.wantStatus)
			}
		})
	}
}

func TestRelistUpdatesCache(t *testing.T) {
	rt := newFakeRuntime()
	cache := container.NewCache()
	p := New(Config{Runtime: rt, Cache: cache, Period: time.Hour})
	ctx := context.Background()

	rt.set(pod("p", sbs(sb("s1", running)), ctr("c1", running)), pod("q", sbs(sb("s2", running))))
	p.Relist(ctx)
	for _, uid := range []types.UID{"p", "q"} {
		st, err := cache.Get(uid)
		if err != nil || st.ID != uid || st.Name == "" {
			t.Fatalf("cache.Get(%s) after first relist = %+v, %v; want the runtime's status", uid, st, err)
		}
	}
	stP, _ := cache.Get("p")

	// q vanishes, p does not change: q's entry goes, p's stays as it was.
	rt.set(pod("p", sbs(sb("s1", running)), ctr("c1", running)))
	p.Relist(ctx)
	if st, err := cache.Get("q"); err != nil || st.Name != "" {
		t.Errorf("cache.Get(q) after q vanished = %+v, %v; want the empty status", st, err)
	}
	if st, _ := cache.Get("p"); st != stP {
		t.Errorf("cache.Get(p) = %+v, want the unchanged earlier status %+v", st, stP)
	}
}

func TestRelistReinspectsFailedStatus(t *testing.T) {
	rt := newFakeRuntime()
	cache := container.NewCache()
	p := New(Config{Runtime: rt, Cache: cache, Period: time.Hour})
	ctx := context.Background()
	stable := pod("p", sbs(sb("s1", running)), ctr("c1", running))
	rt.set(stable)

	rt.failStatus["p"] = true
	p.Relist(ctx)
	if got := rt.takeCalls(); !reflect.DeepEqual(got, uids("p")) {
		t.Fatalf("first relist: GetPodStatus calls = %v, want [p]", got)
	}
	if _, err := cache.Get("p"); err == nil {
		t.Fatal("cache.Get(p) after a failed status read: want the error, got nil")
	}
	if len(drain(p)) == 0 {
		t.Error("first relist: want the pod's events even though its status failed")
	}

	// Nothing changed, but the failed read is retried; it still fails.
	p.Relist(ctx)
	if got := rt.takeCalls(); !reflect.DeepEqual(got, uids("p")) {
		t.Fatalf("second relist: GetPodStatus calls = %v, want [p] (reinspect)", got)
	}
	if got := drain(p); len(got) != 0 {
		t.Errorf("second relist: events = %v, want none (nothing changed)", got)
	}

	// Retried again, and now it works.
	rt.failStatus["p"] = false
	p.Relist(ctx)
	if got := rt.takeCalls(); !reflect.DeepEqual(got, uids("p")) {
		t.Fatalf("third relist: GetPodStatus calls = %v, want [p] (reinspect)", got)
	}
	if st, err := cache.Get("p"); err != nil || st.Name == "" {
		t.Fatalf("cache.Get(p) after a successful retry = %+v, %v; want the status", st, err)
	}

	// Once read, an unchanged pod is left alone.
	p.Relist(ctx)
	if got := rt.takeCalls(); len(got) != 0 {
		t.Fatalf("fourth relist: GetPodStatus calls = %v, want none", got)
	}
}

func TestRelistMovesCacheTimeForward(t *testing.T) {
	rt := newFakeRuntime()
	cache := container.NewCache()
	p := New(Config{Runtime: rt, Cache: cache, Period: time.Hour})
	ctx := context.Background()
	// A pod with no change and one not in the runtime at all: both must see
	// a fresher cache after each relist.
	rt.set(pod("p", sbs(sb("s1", running))))
	p.Relist(ctx)

	for i := range 3 {
		for _, uid := range []types.UID{"p", "nobody"} {
			mark := time.Now()
			done := make(chan error, 1)
			wctx, cancel := context.WithTimeout(ctx, waitTimeout)
			go func() {
				_, err := cache.GetNewerThan(wctx, uid, mark)
				done <- err
			}()
			select {
			case err := <-done:
				cancel()
				t.Fatalf("round %d, %s: GetNewerThan returned before the relist: %v", i, uid, err)
			case <-time.After(notYet):
			}
			p.Relist(ctx)
			if err := <-done; err != nil {
				t.Fatalf("round %d, %s: GetNewerThan after relist: %v", i, uid, err)
			}
			cancel()
		}
	}
	if got := rt.takeCalls(); !reflect.DeepEqual(got, uids("p")) {
		t.Errorf("GetPodStatus calls = %v, want only the first relist's [p]", got)
	}
}

func TestRelistFailureChangesNothing(t *testing.T) {
	rt := newFakeRuntime()
	cache := container.NewCache()
	p := New(Config{Runtime: rt, Cache: cache, Period: time.Hour})
	ctx := context.Background()
	rt.set(pod("p", sbs(sb("s1", running)), ctr("c1", running)))
	p.Relist(ctx)
	drain(p)

	rt.mu.Lock()
	rt.listErr = errors.New("runtime down")
	rt.mu.Unlock()
	mark := time.Now()
	p.Relist(ctx)
	if got := drain(p); len(got) != 0 {
		t.Errorf("failed relist: events = %v, want none", got)
	}
	if got := p.Pods(); len(got) != 1 || got[0].UID != "p" {
		t.Errorf("failed relist: Pods() = %v, want the last good relist's [p]", got)
	}
	wctx, cancel := context.WithTimeout(ctx, notYet)
	defer cancel()
	if _, err := cache.GetNewerThan(wctx, "p", mark); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("failed relist moved the cache time forward (GetNewerThan err = %v)", err)
	}

	// The next good relist diffs against the last good one.
	rt.mu.Lock()
	rt.listErr = nil
	rt.mu.Unlock()
	rt.set(pod("p", sbs(sb("s1", running)), ctr("c1", exited)))
	p.Relist(ctx)
	if got, want := drain(p), sortedEvents(ev("p", ContainerDied, "c1")); !reflect.DeepEqual(got, want) {
		t.Errorf("relist after recovery: events = %v, want %v", got, want)
	}
}

func TestHealthy(t *testing.T) {
	rt := newFakeRuntime()
	p := New(Config{Runtime: rt, Cache: container.NewCache(), Period: time.Hour})
	if err := p.Healthy(); err == nil {
		t.Fatal("Healthy before any relist: want an error")
	}
	rt.mu.Lock()
	rt.listErr = errors.New("runtime down")
	rt.mu.Unlock()
	p.Relist(context.Background())
	if err := p.Healthy(); err == nil {
		t.Fatal("Healthy after only a failed relist: want an error")
	}
	rt.mu.Lock()
	rt.listErr = nil
	rt.mu.Unlock()
	p.Relist(context.Background())
	if err := p.Healthy(); err != nil {
		t.Fatalf("Healthy after a relist: %v", err)
	}
}

func TestPods(t *testing.T) {
	rt := newFakeRuntime()
	p := New(Config{Runtime: rt, Cache: container.NewCache(), Period: time.Hour})
	if got := p.Pods(); len(got) != 0 {
		t.Fatalf("Pods before relist = %v, want none", got)
	}
	rt.set(pod("p", sbs(sb("s1", running))), pod("q", nil, ctr("c1", exited)))
	p.Relist(context.Background())
	got := p.Pods()
	sort.Slice(got, func(i, j int) bool { return got[i].UID < got[j].UID })
	want := []cri.PodRef{{UID: "p", Name: "p", Namespace: "ns"}, {UID: "q", Name: "q", Namespace: "ns"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Pods = %v, want %v", got, want)
	}
}

func TestRunRelistsUntilCancelled(t *testing.T) {
	rt := newFakeRuntime()
	clk := testclock.NewFakeClock(time.Now())
	p := New(Config{Runtime: rt, Cache: container.NewCache(), Period: time.Second, Clock: clk})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()

	// Run relists at once and then every period: a pod appearing later is
	// seen without anyone calling Relist, once the clock has moved a period.
	for p.LastRelist().IsZero() { // the first relist done
		time.Sleep(time.Millisecond)
	}
	rt.set(pod("p", sbs(sb("s1", running))))
	select {
	case e := <-p.Events():
		t.Fatalf("event %+v before the period passed", e)
	default:
	}
	clk.Step(time.Second)
	select {
	case e := <-p.Events():
		if e.ID != "p" || e.Type != ContainerStarted || e.Data != "s1" {
			t.Errorf("event = %+v, want p ContainerStarted s1", e)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Run produced no event")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(waitTimeout):
		t.Fatal("Run did not return after cancel")
	}
}
