package prober

import (
	"context"
	"sync"
	"time"
)

// slots caps how many exec probes run at once, and hands a freed slot to
// an urgent probe before any other. A probe is urgent while its result
// still holds the pod back (a readiness probe that has not succeeded, a
// startup probe): when a batch of containers starts, their first probes
// must not queue behind the routine probes of containers already ready,
// or the batch is Ready a whole queue later than it needs to be.
//
// The cap follows the runtime's measured ExecSync latency, against the
// probe's own timeout: each exec is a runc exec, and too many at once on
// a small node thrash each other and the starting containers until they
// time out (a failed probe, and a period lost). While execs end well
// inside their timeouts (under a quarter) and probes wait for a slot,
// the cap grows by one; when one takes more than half its timeout, it
// shrinks by a quarter. It stays within [min, max].
type slots struct {
	mu             sync.Mutex
	limit, inUse   int
	min, max       int
	urgent, normal []chan struct{} // waiters, first come first served
}

func newSlots(initial, min, max int) *slots {
	return &slots{limit: initial, min: min, max: max}
}

// acquire waits for a slot; on success the caller must release it.
func (s *slots) acquire(ctx context.Context, urgent bool) error {
	s.mu.Lock()
	if s.inUse < s.limit {
		s.inUse++
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
			s.release(0, 0)
		}
		return ctx.Err()
	}
}

// release returns a slot whose exec took took out of its timeout (zero:
// no measure), adjusts the cap by it, and hands the free slots to the
// urgent waiters first, in the order they came, then to the others.
func (s *slots) release(took, timeout time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inUse--
	if took > 0 && timeout > 0 {
		s.adjust(took, timeout)
	}
	for s.inUse < s.limit {
		q := &s.urgent
		if len(*q) == 0 {
			q = &s.normal
		}
		if len(*q) == 0 {
			return
		}
		ch := (*q)[0]
		*q = (*q)[1:]
		s.inUse++
		ch <- struct{}{}
	}
}

// adjust moves the cap by one exec's latency. Called with s.mu held.
func (s *slots) adjust(took, timeout time.Duration) {
	waiting := len(s.urgent)+len(s.normal) > 0
	switch {
	case took > timeout/2 && s.limit > s.min:
		s.limit = max(s.min, s.limit-max(1, s.limit/4))
	case took < timeout/4 && waiting && s.limit < s.max:
		s.limit++
	}
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
