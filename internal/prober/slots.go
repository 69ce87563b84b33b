package prober

import (
	"context"
	"sync"
)

// slots caps how many exec probes run at once, and hands a freed slot to
// an urgent probe before any other. A probe is urgent while its result
// still holds the pod back (a readiness probe that has not succeeded, a
// startup probe): when a batch of containers starts, their first probes
// must not queue behind the routine probes of containers already ready,
// or the batch is Ready a whole queue later than it needs to be.
type slots struct {
	mu             sync.Mutex
	free           int
	urgent, normal []chan struct{} // waiters, first come first served
}

func newSlots(n int) *slots { return &slots{free: n} }

// acquire waits for a slot; on success the caller must release it.
func (s *slots) acquire(ctx context.Context, urgent bool) error {
	s.mu.Lock()
	if s.free > 0 {
		s.free--
		s.mu.Unlock()
		return nil
	}
	ch := make(chan struct{}, 1)
	if urgent {
		s.urgent = append(s.urgent, ch)
	} else {
		s.normal = append(s.normal, ch)
	}
	s.mu.Unlock()

	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		removed := remove(&s.urgent, ch) || remove(&s.normal, ch)
		s.mu.Unlock()
		if !removed {
			// The slot was handed over as ctx ended: pass it on.
			s.release()
		}
		return ctx.Err()
	}
}

// release gives the slot to the first urgent waiter, else the first other
// one, else back to the pool.
func (s *slots) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range []*[]chan struct{}{&s.urgent, &s.normal} {
		if len(*q) > 0 {
			ch := (*q)[0]
			*q = (*q)[1:]
			ch <- struct{}{}
			return
		}
	}
	s.free++
}

// remove deletes ch from q and reports whether it was there.
func remove(q *[]chan struct{}, ch chan struct{}) bool {
	for i, c := range *q {
		if c == ch {
			*q = append((*q)[:i], (*q)[i+1:]...)
			return true
		}
	}
	return false
}
