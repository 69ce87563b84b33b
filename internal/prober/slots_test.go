package prober

import (
	"context"
	"testing"
	"time"
)

// waiters blocks until s has n urgent and m normal waiters queued.
func waiters(t *testing.T, s *slots, urgent, normal int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		s.mu.Lock()
		u, n := len(s.urgent), len(s.normal)
		s.mu.Unlock()
		if u == urgent && n == normal {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiters: %d urgent, %d normal; want %d, %d", u, n, urgent, normal)
		}
	}
}

// A freed slot goes to the urgent waiters first, in the order they came,
// then to the others in theirs.
func TestSlotsUrgentFirst(t *testing.T) {
	ctx := context.Background()
	s := newSlots(1, 1, 1)
	if err := s.acquire(ctx, false); err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 4)
	start := func(name string, urgent bool, u, n int) {
		go func() {
			if err := s.acquire(ctx, urgent); err != nil {
				t.Errorf("%s: %v", name, err)
				return
			}
			order <- name
		}()
		waiters(t, s, u, n)
	}
	start("normal1", false, 0, 1)
	start("urgent1", true, 1, 1)
	start("normal2", false, 1, 2)
	start("urgent2", true, 2, 2)

	var got []string
	for range 4 {
		s.release(0, 0)
		select {
		case name := <-order:
			got = append(got, name)
		case <-time.After(5 * time.Second):
			t.Fatalf("no waiter got the slot; so far %v", got)
		}
	}
	want := []string{"urgent1", "urgent2", "normal1", "normal2"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("slots went to %v, want %v", got, want)
		}
	}
	s.release(0, 0)
	if s.inUse != 0 {
		t.Errorf("slots in use after all released: %d, want 0", s.inUse)
	}
}

// A waiter whose context ends leaves the queue and takes no slot with it.
func TestSlotsCancelledWaiter(t *testing.T) {
	s := newSlots(1, 1, 1)
	if err := s.acquire(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.acquire(ctx, true) }()
	waiters(t, s, 1, 0)
	cancel()
	if err := <-done; err == nil {
		t.Fatal("acquire with an ended context succeeded")
	}
	waiters(t, s, 0, 0)
	s.release(0, 0)
	if err := s.acquire(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if s.inUse != 1 {
		t.Errorf("slots in use: %d, want 1", s.inUse)
	}
}

// The cap follows the execs' latency against their timeout: it grows by
// one per exec that ends fast while probes wait, hands the new slot out
// at once, shrinks by a quarter per exec that takes more than half its
// timeout, and stays within its bounds.
func TestSlotsFollowExecLatency(t *testing.T) {
	ctx := context.Background()
	s := newSlots(2, 1, 4)
	for range 2 {
		if err := s.acquire(ctx, false); err != nil {
			t.Fatal(err)
		}
	}
	got := make(chan struct{}, 8)
	for i := range 3 {
		go func() {
			if err := s.acquire(ctx, true); err == nil {
				got <- struct{}{}
			}
		}()
		waiters(t, s, i+1, 0)
	}
	// A fast exec with probes waiting: the cap grows to 3, and two
	// waiters get slots (the one freed and the new one).
	s.release(100*time.Millisecond, time.Second)
	for range 2 {
		<-got
	}
	if s.limit != 3 || s.inUse != 3 {
		t.Fatalf("after a fast exec: cap %d, in use %d; want 3, 3", s.limit, s.inUse)
	}
	// Fast again, one waiter left: the cap grows to 4, its bound, and
	// the last waiter gets a slot.
	s.release(100*time.Millisecond, time.Second)
	<-got
	if s.limit != 4 || s.inUse != 3 {
		t.Fatalf("after a second fast exec: cap %d, in use %d; want 4, 3", s.limit, s.inUse)
	}
	// Fast with nobody waiting: no growth (and the bound holds anyway).
	s.release(100*time.Millisecond, time.Second)
	if s.limit != 4 {
		t.Errorf("cap grew to %d with nobody waiting", s.limit)
	}
	// Between a quarter and half the timeout: no change.
	s.release(400*time.Millisecond, time.Second)
	if s.limit != 4 {
		t.Errorf("cap moved to %d on an exec inside the band", s.limit)
	}
	// Slow: a quarter less each time, never under the minimum.
	s.release(700*time.Millisecond, time.Second)
	if s.limit != 3 {
		t.Errorf("after a slow exec: cap %d, want 3", s.limit)
	}
	for range 3 {
		s.inUse++ // an exec that started meanwhile
		s.release(900*time.Millisecond, time.Second)
	}
	if s.limit != 1 {
		t.Errorf("after slow execs: cap %d, want the minimum 1", s.limit)
	}
	if s.inUse != 0 {
		t.Errorf("slots in use at the end: %d, want 0", s.inUse)
	}
}
