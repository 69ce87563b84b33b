package ports

import (
	"net"
	"strconv"
	"testing"
)

func TestFreeThenTaken(t *testing.T) {
	p, err := Free()
	if err != nil {
		t.Fatal(err)
	}
	if p <= 0 || p > 65535 {
		t.Fatalf("Free() = %d, not a port", p)
	}
	if !IsFree(p) {
		t.Fatalf("IsFree(%d) = false right after Free returned it", p)
	}
	l, err := net.Listen("tcp", ":"+strconv.Itoa(p))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if IsFree(p) {
		t.Errorf("IsFree(%d) = true while a listener holds it", p)
	}
}

// Free's ports are below the ephemeral range, where outgoing connections
// take their source ports.
func TestFreeBelowEphemeralRange(t *testing.T) {
	first := ephemeralStart()
	for range 50 {
		p, err := Free()
		if err != nil {
			t.Fatal(err)
		}
		if first-lowest >= 1000 && (p < lowest || p >= first) {
			t.Fatalf("Free() = %d, outside %d-%d", p, lowest, first-1)
		}
	}
}

// A port is handed out once only in a process, though it stays free
// until its taker listens on it.
func TestFreeNeverHandsOutAPortTwice(t *testing.T) {
	if ephemeralStart()-lowest < 1000 {
		t.Skip("no room below the ephemeral range: the kernel chooses")
	}
	seen := map[int]bool{}
	for range 500 {
		p, err := Free()
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("Free() handed out %d twice", p)
		}
		seen[p] = true
	}
}

// With a share set, every port Free hands out is in it.
func TestFreeKeepsToItsShare(t *testing.T) {
	for _, s := range []struct {
		env  string
		k, n int
	}{{"1/2", 1, 2}, {"0/3", 0, 3}} {
		t.Setenv(ShareEnv, s.env)
		for range 100 {
			p, err := Free()
			if err != nil {
				t.Fatal(err)
			}
			if p%s.n != s.k {
				t.Fatalf("share %s: port %d", s.env, p)
			}
		}
	}
}
