package dra

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testclock "k8s.io/utils/clock/testing"
)

// waitUntil polls cond until it holds or a generous deadline passes.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sliceWipes records the ResourceSlice deletions asked of a fake
// apiserver, as field selectors, failing the first fail of them.
type sliceWipes struct {
	mu   sync.Mutex
	sels []string
	fail int
}

func (s *sliceWipes) react(a k8stesting.Action) (bool, runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	dc := a.(k8stesting.DeleteCollectionAction)
	s.sels = append(s.sels, dc.GetListRestrictions().Fields.String())
	if s.fail > 0 {
		s.fail--
		return true, nil, errors.New("apiserver unavailable")
	}
	return true, nil, nil
}

func (s *sliceWipes) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sels)
}

// startWiper runs a Wiper for node "n1" on a fake clock; the startup
// wipe fails fail times first.
func startWiper(t *testing.T, fail int) (*Wiper, *sliceWipes, *testclock.FakeClock) {
	t.Helper()
	wipes := &sliceWipes{fail: fail}
	client := fake.NewClientset()
	client.PrependReactor("delete-collection", "resourceslices", wipes.react)
	fc := testclock.NewFakeClock(time.Now())
	w := NewWiper(WiperConfig{Slices: client.ResourceV1().ResourceSlices(), NodeName: "n1", Clock: fc})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return w, wipes, fc
}

// idle waits until no wipe is due or running and the loop waits on the
// clock or a kick.
func (w *Wiper) idle() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.due) == 0
}

const nodeSel = "spec.nodeName=n1"

// At start the node's slices are wiped, all drivers', retried until the
// apiserver answers.
func TestWiperWipesNodeSlicesAtStart(t *testing.T) {
	_, wipes, _ := startWiper(t, 1)
	waitUntil(t, "the startup wipe retried", func() bool { return len(wipes.seen()) == 2 })
	if got := wipes.seen(); !slices.Equal(got, []string{nodeSel, nodeSel}) {
		t.Fatalf("wipes %v, want the node's slices twice (a failure, then the retry)", got)
	}
}

// A driver away for the delay has its slices of the node wiped; one
// back before the delay keeps them.
func TestWiperWipesDriverAwayPastDelay(t *testing.T) {
	w, wipes, fc := startWiper(t, 0)
	waitUntil(t, "the startup wipe", func() bool { return len(wipes.seen()) == 1 })
	w.Available("gone.example.com", false)
	w.Available("back.example.com", false)
	w.Available("back.example.com", true)
	waitUntil(t, "the loop waiting for the delay", fc.HasWaiters)
	fc.Step(WipeDelay - time.Second)
	w.Available("gone.example.com", false) // again: the first time still counts
	if got := wipes.seen(); len(got) != 1 {
		t.Fatalf("wipes before the delay: %v", got)
	}
	waitUntil(t, "the loop waiting for the rest of the delay", fc.HasWaiters)
	fc.Step(time.Second)
	waitUntil(t, "the wipe done", w.idle)
	want := []string{nodeSel, "spec.driver=gone.example.com," + nodeSel}
	if got := wipes.seen(); !slices.Equal(got, want) {
		t.Fatalf("wipes %v, want %v", got, want)
	}
}
