package pleg

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/cri"
)

// fakeStream is an EventSource whose subscriptions the test drives: each
// GetContainerEvents call shows up on subs, and runs until the test ends
// it (or its ctx ends).
type fakeStream struct{ subs chan *subscription }

type subscription struct {
	ch  chan *runtimeapi.ContainerEventResponse
	end chan error
}

func newFakeStream() *fakeStream { return &fakeStream{subs: make(chan *subscription, 10)} }

func (f *fakeStream) GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, _ func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	s := &subscription{ch: ch, end: make(chan error, 1)}
	f.subs <- s
	select {
	case err := <-s.end:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *fakeStream) next(t *testing.T) *subscription {
	t.Helper()
	select {
	case s := <-f.subs:
		return s
	case <-time.After(waitTimeout):
		t.Fatal("the PLEG did not subscribe")
		return nil
	}
}

func (f *fakeStream) noSubscription(t *testing.T) {
	t.Helper()
	select {
	case <-f.subs:
		t.Fatal("the PLEG subscribed again")
	case <-time.After(notYet):
	}
}

// event is a runtime event for container id of the Skiff pod uid.
func event(uid, id string, typ runtimeapi.ContainerEventType) *runtimeapi.ContainerEventResponse {
	ref := cri.PodRef{UID: types.UID(uid), Name: uid, Namespace: "ns"}
	return &runtimeapi.ContainerEventResponse{ContainerId: id, ContainerEventType: typ,
		PodSandboxStatus: &runtimeapi.PodSandboxStatus{
			Metadata: &runtimeapi.PodSandboxMetadata{Uid: uid, Name: uid, Namespace: "ns"},
			Labels:   map[string]string{cri.PodUIDLabel: string(ref.UID), cri.PodNameLabel: ref.Name, cri.PodNamespaceLabel: ref.Namespace},
		}}
}

// waitFor polls cond: it synchronizes with the PLEG's goroutines, it times
// nothing.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// nextEvents waits for n PLEG events and returns them sorted.
func nextEvents(t *testing.T, p *PLEG, n int) []Event {
	t.Helper()
	var out []Event
	for len(out) < n {
		select {
		case e := <-p.Events():
			out = append(out, *e)
		case <-time.After(waitTimeout):
			t.Fatalf("got events %v, want %d", out, n)
		}
	}
	return sortedEvents(out...)
}

func noEvents(t *testing.T, p *PLEG) {
	t.Helper()
	select {
	case e := <-p.Events():
		t.Fatalf("unexpected event %+v", e)
	case <-time.After(notYet):
	}
}

type eventedFixture struct {
	rt     *fakeRuntime
	stream *fakeStream
	clk    *testclock.FakeClock
	cache  *container.Cache
	p      *PLEG
	sub    *subscription
}

// startEvented runs a PLEG over pod p (sandbox s1, container c1 running)
// and brings its event stream up with a first event for a sandbox that is
// not a kubelet's: the PLEG relists once more and then only every
// EventedPeriod.
func startEvented(t *testing.T) *eventedFixture {
	t.Helper()
	f := &eventedFixture{rt: newFakeRuntime(), stream: newFakeStream(),
		clk: testclock.NewFakeClock(time.Unix(1000, 0)), cache: container.NewCache()}
	f.rt.set(pod("p", sbs(sb("s1", running)), ctr("c1", running)))
	f.p = New(Config{Runtime: f.rt, Cache: f.cache, Period: time.Second, EventedPeriod: 10 * time.Second,
		Events: f.stream, Clock: f.clk})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	f.sub = f.stream.next(t)
	waitFor(t, "the first relist", func() bool { return f.rt.listCalls() == 1 })
	nextEvents(t, f.p, 2) // p's sandbox and container started
	f.sub.ch <- &runtimeapi.ContainerEventResponse{ContainerId: "foreign",
		ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT,
		PodSandboxStatus:   &runtimeapi.PodSandboxStatus{Metadata: &runtimeapi.PodSandboxMetadata{Name: "not-a-pod"}}}
	waitFor(t, "the stream to count as healthy", f.p.Evented)
	waitFor(t, "the relist of a new stream", func() bool { return f.rt.listCalls() == 2 })
	f.rt.takeCalls()
	if offered, ok := f.p.EventsOffered(context.Background()); !ok || !offered {
		t.Fatalf("EventsOffered = %v, %v; want true, true", offered, ok)
	}
	return f
}

// An event makes the PLEG read its pod and notify its worker at once, with
// no relist; the relist that follows finds nothing new to report.
func TestEventTriggersSyncWithoutRelist(t *testing.T) {
	f := startEvented(t)
	f.rt.set(pod("p", sbs(sb("s1", running)), ctr("c1", exited)))
	f.sub.ch <- event("p", "c1", runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
	if got, want := nextEvents(t, f.p, 1), sortedEvents(ev("p", ContainerDied, "c1")); !eventsEqual(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	if n := f.rt.listCalls(); n != 2 {
		t.Errorf("the event caused a relist (%d list calls, want 2)", n)
	}
	if got := f.rt.takeCalls(); len(got) != 1 || got[0] != "p" {
		t.Errorf("status reads = %v, want [p]", got)
	}
	st, _ := f.cache.Get("p")
	if c := st.FindContainer("c-c1"); c == nil || c.State != exited {
		t.Fatalf("cached status of p = %+v, want c1 exited", st)
	}

	// The safety-net relist runs every EventedPeriod, not every Period.
	f.clk.Step(time.Second)
	noEvents(t, f.p)
	if n := f.rt.listCalls(); n != 2 {
		t.Errorf("relisted after Period while events flow (%d list calls)", n)
	}
	f.clk.Step(9 * time.Second)
	waitFor(t, "the safety-net relist", func() bool { return f.rt.listCalls() == 3 })
	noEvents(t, f.p) // the event already reported the change
	if got := f.rt.takeCalls(); len(got) != 0 {
		t.Errorf("the relist read %v again", got)
	}
	st2, _ := f.cache.Get("p")
	if st2.Name != st.Name {
		t.Errorf("the relist replaced the event's status %q with %q", st.Name, st2.Name)
	}
}

func gaugeValue(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

// The running gauges follow an event's read, without waiting for the
// relist that comes only every EventedPeriod.
func TestEventUpdatesRunningGauges(t *testing.T) {
	f := startEvented(t)
	exitedNow := func() float64 {
		return gaugeValue(t, f.p.metrics.RunningContainers.WithLabelValues(string(container.StateExited)))
	}
	if got := gaugeValue(t, f.p.metrics.RunningPods); got != 1 {
		t.Fatalf("running pods after the relist = %v, want 1", got)
	}
	if got := exitedNow(); got != 0 {
		t.Fatalf("exited containers after the relist = %v, want 0", got)
	}
	f.rt.set(pod("p", sbs(sb("s1", exited)), ctr("c1", exited)))
	f.sub.ch <- event("p", "c1", runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
	nextEvents(t, f.p, 1)
	if got := exitedNow(); got != 1 {
		t.Errorf("exited containers after the event = %v, want 1", got)
	}
	if got := gaugeValue(t, f.p.metrics.RunningPods); got != 0 {
		t.Errorf("running pods after the event = %v, want 0", got)
	}
	if n := f.rt.listCalls(); n != 2 {
		t.Errorf("the event caused a relist (%d list calls, want 2)", n)
	}
}

// A created event causes no read: the kubelet made the container and
// starts it next; the started event that follows is read.
func TestCreatedEventReadsNothing(t *testing.T) {
	f := startEvented(t)
	f.rt.set(pod("p", sbs(sb("s1", running)), ctr("c1", running), ctr("c2", created)))
	f.sub.ch <- event("p", "c2", runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT)
	noEvents(t, f.p)
	if got := f.rt.takeCalls(); len(got) != 0 {
		t.Errorf("status reads for a created event: %v", got)
	}
	f.rt.set(pod("p", sbs(sb("s1", running)), ctr("c1", running), ctr("c2", running)))
	f.sub.ch <- event("p", "c2", runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	if got, want := nextEvents(t, f.p, 1), sortedEvents(ev("p", ContainerStarted, "c2")); !eventsEqual(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	if got := f.rt.takeCalls(); len(got) != 1 || got[0] != "p" {
		t.Errorf("status reads = %v, want one of p", got)
	}
	if n := f.rt.listCalls(); n != 2 {
		t.Errorf("the events caused a relist (%d list calls, want 2)", n)
	}
}

// A change the runtime never sent an event for is found by the relist
// that a broken stream triggers at once; the PLEG then relists every
// Period, resubscribes after a back-off, and relists again once the new
// stream is up.
func TestBrokenStreamFallsBackAndResubscribes(t *testing.T) {
	f := startEvented(t)
	f.rt.set(pod("p", sbs(sb("s1", running)), ctr("c1", exited))) // its event is lost
	f.sub.end <- errors.New("transport is closing")
	if got, want := nextEvents(t, f.p, 1), sortedEvents(ev("p", ContainerDied, "c1")); !eventsEqual(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	if f.p.Evented() {
		t.Error("still evented after the stream broke")
	}
	waitFor(t, "the relist of a broken stream", func() bool { return f.rt.listCalls() == 3 })
	// The relist's timer and the back-off's.
	waitFor(t, "the back-off timer", func() bool { return f.clk.Waiters() == 2 })

	// Back to relisting every Period; resubscribed after resubscribeMin.
	f.rt.set(pod("p", sbs(sb("s1", running)), ctr("c1", exited), ctr("c2", running)))
	f.clk.Step(time.Second)
	if got, want := nextEvents(t, f.p, 1), sortedEvents(ev("p", ContainerStarted, "c2")); !eventsEqual(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	sub := f.stream.next(t)
	before := f.rt.listCalls()
	sub.ch <- event("p", "c2", runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	waitFor(t, "the new stream to count as healthy", f.p.Evented)
	waitFor(t, "the relist of the new stream", func() bool { return f.rt.listCalls() > before })
}

// A stream that keeps breaking before it is healthy is resubscribed with a
// back-off that grows: the fake clock is moved in small steps until the
// next subscription, and the time it took is at least the back-off.
func TestResubscribeBacksOff(t *testing.T) {
	rt := newFakeRuntime()
	stream := newFakeStream()
	clk := testclock.NewFakeClock(time.Unix(1000, 0))
	p := New(Config{Runtime: rt, Cache: container.NewCache(), Period: time.Hour, Events: stream, Clock: clk})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	sub := stream.next(t)
	const step = 10 * time.Millisecond
	for _, want := range []time.Duration{resubscribeMin, 2 * resubscribeMin, 4 * resubscribeMin} {
		broke := clk.Now()
		sub.end <- status.Error(codes.Unavailable, "connection refused")
		sub = nil
		for sub == nil {
			select {
			case sub = <-stream.subs:
			default:
				if clk.Since(broke) > want+time.Second {
					t.Fatalf("no resubscription %v after the break, want one after %v", clk.Since(broke), want)
				}
				clk.Step(step)
				time.Sleep(time.Millisecond)
			}
		}
		if got := clk.Since(broke); got < want || got > want+500*time.Millisecond {
			t.Errorf("resubscribed %v after the break, want %v", got, want)
		}
	}
	if p.Evented() {
		t.Error("evented without a healthy stream")
	}
}

// A runtime without GetContainerEvents is asked once and then left to the
// relist, which keeps its normal period.
func TestUnimplementedEventsStayOnRelist(t *testing.T) {
	rt := newFakeRuntime()
	stream := newFakeStream()
	clk := testclock.NewFakeClock(time.Unix(1000, 0))
	p := New(Config{Runtime: rt, Cache: container.NewCache(), Period: time.Second, Events: stream, Clock: clk})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	stream.next(t).end <- status.Error(codes.Unimplemented, "unknown method GetContainerEvents")
	waitFor(t, "the first relist", func() bool { return rt.listCalls() == 1 })
	// Only the relist's timer is left once the subscription has ended.
	waitFor(t, "the subscription to end", func() bool { return clk.Waiters() == 1 })
	for i := 2; i <= 4; i++ {
		clk.Step(time.Second)
		waitFor(t, "a relist every Period", func() bool { return rt.listCalls() == i })
	}
	clk.Step(2 * resubscribeMax)
	stream.noSubscription(t)
	if p.Evented() {
		t.Error("evented on a runtime without events")
	}
	if offered, ok := p.EventsOffered(context.Background()); !ok || offered {
		t.Errorf("EventsOffered = %v, %v; want false, true", offered, ok)
	}
}

// Events about containers the PLEG cannot place: a removed sandbox's event
// (no sandbox status) for an ID it has listed reads that pod; one for an
// ID it never saw makes it relist; a sandbox that is not a kubelet's is
// ignored.
func TestEventsForUnknownPods(t *testing.T) {
	f := startEvented(t)

	f.rt.set(pod("p", sbs(sb("s1", exited)), ctr("c1", exited)))
	f.sub.ch <- &runtimeapi.ContainerEventResponse{ContainerId: "s1",
		ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT}
	want := sortedEvents(ev("p", ContainerDied, "s1"), ev("p", ContainerDied, "c1"))
	if got := nextEvents(t, f.p, 2); !eventsEqual(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	if n := f.rt.listCalls(); n != 2 {
		t.Errorf("a known container's event caused a relist (%d list calls)", n)
	}

	f.rt.set(pod("p", sbs(sb("s1", exited)), ctr("c1", exited)), pod("q", sbs(sb("s9", running))))
	f.sub.ch <- &runtimeapi.ContainerEventResponse{ContainerId: "s9",
		ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT}
	if got, want := nextEvents(t, f.p, 1), sortedEvents(ev("q", ContainerStarted, "s9")); !eventsEqual(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	if n := f.rt.listCalls(); n != 3 {
		t.Errorf("list calls = %d, want a relist (3) for an unknown container", n)
	}

	f.rt.takeCalls()
	f.sub.ch <- &runtimeapi.ContainerEventResponse{ContainerId: "other",
		ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT,
		PodSandboxStatus:   &runtimeapi.PodSandboxStatus{Metadata: &runtimeapi.PodSandboxMetadata{Name: "x"}, Labels: map[string]string{"a": "b"}}}
	noEvents(t, f.p)
	if got := f.rt.takeCalls(); len(got) != 0 || f.rt.listCalls() != 3 {
		t.Errorf("a foreign sandbox's event read %v, list calls %d", got, f.rt.listCalls())
	}
}

// An event for a pod the PLEG has not listed yet (created since the last
// relist) reports it as a relist would.
func TestEventForNewPod(t *testing.T) {
	f := startEvented(t)
	f.rt.set(pod("p", sbs(sb("s1", running)), ctr("c1", running)), pod("n", sbs(sb("s2", running))))
	f.sub.ch <- event("n", "s2", runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	if got, want := nextEvents(t, f.p, 1), sortedEvents(ev("n", ContainerStarted, "s2")); !eventsEqual(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	if got := f.p.Pods(); len(got) != 2 {
		t.Errorf("Pods = %v, want p and n", got)
	}
}

// While events flow, a pod worker waiting for a status newer than its last
// sync gets its pod read at once instead of waiting for the relist; without
// a healthy stream it waits for the relist.
func TestWaitingReaderServedWhileEvented(t *testing.T) {
	f := startEvented(t)
	mark := f.clk.Now()
	f.clk.Step(time.Millisecond)
	got := make(chan error, 1)
	go func() {
		_, err := f.cache.GetNewerThan(context.Background(), "p", mark)
		got <- err
	}()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("the waiting reader was not served")
	}
	if n := f.rt.listCalls(); n != 2 {
		t.Errorf("served by a relist (%d list calls), want a read of the pod", n)
	}
	if calls := f.rt.takeCalls(); len(calls) != 1 || calls[0] != "p" {
		t.Errorf("status reads = %v, want [p]", calls)
	}
}

func TestWaitingReaderWaitsForRelistWithoutEvents(t *testing.T) {
	rt := newFakeRuntime()
	rt.set(pod("p", sbs(sb("s1", running))))
	clk := testclock.NewFakeClock(time.Unix(1000, 0))
	cache := container.NewCache()
	stream := newFakeStream()
	p := New(Config{Runtime: rt, Cache: cache, Period: time.Second, Events: stream, Clock: clk})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	stream.next(t) // subscribed, not yet healthy
	waitFor(t, "the first relist", func() bool { return rt.listCalls() == 1 })
	mark := clk.Now()
	got := make(chan error, 1)
	go func() {
		_, err := cache.GetNewerThan(context.Background(), "p", mark)
		got <- err
	}()
	select {
	case <-got:
		t.Fatal("served before a relist, with no healthy stream")
	case <-time.After(notYet):
	}
	clk.Step(500 * time.Millisecond) // short of both the period and the settle time
	select {
	case <-got:
		t.Fatal("served before a relist, with no healthy stream")
	case <-time.After(notYet):
	}
	clk.Step(500 * time.Millisecond)
	select {
	case <-got:
	case <-time.After(waitTimeout):
		t.Fatal("the relist did not serve the waiting reader")
	}
}

func eventsEqual(a, b []Event) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A waiting reader of a pod the PLEG has not listed yet gets a status
// named as the runtime's sandbox says, not a nameless one.
func TestWaitingReaderOfUnlistedPodGetsItsName(t *testing.T) {
	f := startEvented(t)
	f.rt.set(pod("p", sbs(sb("s1", running)), ctr("c1", running)), pod("n", sbs(sb("s2", running))))
	mark := f.clk.Now()
	f.clk.Step(time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	st, err := f.cache.GetNewerThan(ctx, "n", mark)
	if err != nil {
		t.Fatalf("the waiting reader was not served: %v", err)
	}
	if st.Namespace != "ns" || !strings.HasPrefix(st.Name, "n") || len(st.Sandboxes) != 1 {
		t.Fatalf("status of n = %+v, want it named n in ns with its sandbox", st)
	}
	if got := f.p.Pods(); len(got) != 2 {
		t.Errorf("Pods = %v, want p and n", got)
	}
}
