package server

import (
	"container/list"
	"context"
	"net"
	"slices"
)

// clientKey carries the request's client (its RemoteAddr) in a context.
type clientKey struct{}

// withClient tags ctx with the client at remoteAddr (address:port).
func withClient(ctx context.Context, remoteAddr string) context.Context {
	return context.WithValue(ctx, clientKey{}, remoteAddr)
}

// clientOf is the address and the connection (address:port) of the
// client ctx carries; empty for none. IPv6 clients are told apart by
// their full address, as IPv4 ones: pods on one node often share a /64.
func clientOf(ctx context.Context) (addr, conn string) {
	conn, _ = ctx.Value(clientKey{}).(string)
	if host, _, err := net.SplitHostPort(conn); err == nil {
		return host, conn
	}
	return conn, conn
}

type waiterState int

const (
	waiterWaiting waiterState = iota
	waiterGranted             // given a slot
	waiterEvicted             // made way for a better waiter of its client
)

// waiter is one request waiting in a fairQueue. Its state changes under
// the guard's lock, then done is closed.
type waiter struct {
	client *clientQueue
	asked  int    // reviews its connection asked for before
	seq    uint64 // arrival order
	state  waiterState
	done   chan struct{}
}

func (w *waiter) finish(s waiterState) {
	w.state = s
	close(w.done)
}

// before reports whether w goes before o: its connection asked for
// fewer reviews, or as many and it came first.
func (w *waiter) before(o *waiter) bool {
	return w.asked < o.asked || w.asked == o.asked && w.seq < o.seq
}

// clientQueue holds one client's waiters, while it has any.
type clientQueue struct {
	addr    string
	turn    *list.Element // in fairQueue.turns
	waiters []*waiter
}

// fairQueue holds the waiting requests by client, and the clients in
// the order of their turns. Not safe for concurrent use: the guard
// locks it.
type fairQueue struct {
	perClient, max int
	waiting        int
	seq            uint64
	clients        map[string]*clientQueue
	turns          *list.List // *clientQueue; the front's turn is next
}

func newFairQueue(perClient, max int) fairQueue {
	return fairQueue{perClient: perClient, max: max, clients: map[string]*clientQueue{}, turns: list.New()}
}

// push queues a request of the client at addr whose connection asked
// for asked reviews before. When that client's queue is full, its worst
// waiter makes way (evicted, for the caller to finish) if the newcomer
// goes before it; otherwise, or when the whole queue is full, w is nil.
func (q *fairQueue) push(addr string, asked int) (w, evicted *waiter) {
	q.seq++
	w = &waiter{asked: asked, seq: q.seq, done: make(chan struct{})}
	c := q.clients[addr]
	switch {
	case c != nil && len(c.waiters) >= q.perClient:
		worst := slices.MaxFunc(c.waiters, func(a, b *waiter) int { return order(a, b) })
		if !w.before(worst) {
			return nil, nil
		}
		q.remove(worst)
		evicted = worst
		c = q.clients[addr] // gone if that was its last waiter
	case q.waiting >= q.max:
		return nil, nil
	}
	if c == nil {
		c = &clientQueue{addr: addr}
		c.turn = q.turns.PushBack(c)
		q.clients[addr] = c
	}
	w.client = c
	c.waiters = append(c.waiters, w)
	q.waiting++
	return w, evicted
}

// pop takes the next waiter: the best of the client whose turn it is,
// which then goes to the back of the turns. Nil when none waits.
func (q *fairQueue) pop() *waiter {
	e := q.turns.Front()
	if e == nil {
		return nil
	}
	c := e.Value.(*clientQueue)
	w := slices.MinFunc(c.waiters, func(a, b *waiter) int { return order(a, b) })
	q.remove(w)
	if len(c.waiters) > 0 {
		q.turns.MoveToBack(c.turn)
	}
	return w
}

// remove takes w out of the queue, and its client once it has no
// waiter left.
func (q *fairQueue) remove(w *waiter) {
	c := w.client
	i := slices.Index(c.waiters, w)
	if i < 0 {
		return
	}
	c.waiters = slices.Delete(c.waiters, i, i+1)
	q.waiting--
	if len(c.waiters) == 0 {
		q.turns.Remove(c.turn)
		delete(q.clients, c.addr)
	}
}

// order is before as a comparison.
func order(a, b *waiter) int {
	switch {
	case a.before(b):
		return -1
	case b.before(a):
		return 1
	}
	return 0
}
