package server

import (
	"context"
	"fmt"
	"testing"
)

// Turns go round the clients; within a client, to the waiter whose
// connection asked for the fewest reviews, then the oldest.
func TestFairQueueOrder(t *testing.T) {
	q := newFairQueue(10, 100)
	name := map[*waiter]string{}
	push := func(addr string, asked int) {
		w, ev := q.push(addr, asked)
		if w == nil || ev != nil {
			t.Fatalf("push %s/%d: %v, evicted %v", addr, asked, w, ev)
		}
		name[w] = fmt.Sprintf("%s/%d", addr, asked)
	}
	push("flood", 7)
	push("flood", 5)
	push("flood", 9)
	push("flood", 0) // a fresh connection of the flood's address
	push("metrics", 3)
	push("prometheus", 1)
	push("metrics", 1)
	var got []string
	for w := q.pop(); w != nil; w = q.pop() {
		got = append(got, name[w])
	}
	want := []string{"flood/0", "metrics/1", "prometheus/1", "flood/5", "metrics/3", "flood/7", "flood/9"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("order %v, want %v", got, want)
	}
	if q.waiting != 0 || len(q.clients) != 0 || q.turns.Len() != 0 {
		t.Errorf("emptied queue holds %d waiters, %d clients, %d turns", q.waiting, len(q.clients), q.turns.Len())
	}
}

// A client's full queue refuses a newcomer unless its connection asked
// for fewer reviews than the worst waiter's, which then makes way; other
// clients still get in until the whole queue is full.
func TestFairQueueBounds(t *testing.T) {
	q := newFairQueue(2, 3)
	a1, _ := q.push("a", 4)
	a2, _ := q.push("a", 6)
	if w, _ := q.push("a", 6); w != nil {
		t.Error("a full client queue took a newcomer that asked as much as its worst waiter")
	}
	w, ev := q.push("a", 0)
	if w == nil || ev != a2 {
		t.Fatalf("a fresh connection at a full client queue: %v, evicted %v (want the worst, %v)", w, ev, a2)
	}
	if _, ev := q.push("b", 100); ev != nil {
		t.Errorf("another client's push evicted %v", ev)
	}
	if w, _ := q.push("c", 0); w != nil {
		t.Error("the whole queue, full, took another client")
	}
	q.remove(a1)
	if q.waiting != 2 || len(q.clients["a"].waiters) != 1 {
		t.Errorf("after removing one: %d waiting, client a holds %d", q.waiting, len(q.clients["a"].waiters))
	}
}

// The client is the request's address, and its connection the address
// with its port.
func TestClientOf(t *testing.T) {
	for remote, want := range map[string][2]string{
		"10.0.0.1:4000":  {"10.0.0.1", "10.0.0.1:4000"},
		"[fd00::1]:4000": {"fd00::1", "[fd00::1]:4000"},
		"@":              {"@", "@"}, // a unix socket
		"":               {"", ""},
	} {
		addr, conn := clientOf(withClient(context.Background(), remote))
		if addr != want[0] || conn != want[1] {
			t.Errorf("%q: %q %q, want %q %q", remote, addr, conn, want[0], want[1])
		}
	}
}
