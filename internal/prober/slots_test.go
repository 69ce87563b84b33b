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
	s := newSlots(1)
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
		s.release()
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
	s.release()
	if s.free != 1 {
		t.Errorf("free slots after all released: %d, want 1", s.free)
	}
}

// A waiter whose context ends leaves the queue and takes no slot with it.
func TestSlotsCancelledWaiter(t *testing.T) {
	s := newSlots(1)
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
	s.release()
	if err := s.acquire(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if s.free != 0 {
		t.Errorf("free slots: %d, want 0", s.free)
	}
}
