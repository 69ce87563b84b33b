// Package ports finds free TCP ports for the test control plane, the test
// registry, the end-to-end tests and the benchmark.
package ports

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// lowest is the lowest port Free hands out.
const lowest = 10000

// given holds the ports Free has handed out in this process: a port is
// handed out once only, since its taker may listen on it long after (a
// node started later), and a test running beside may not have it too.
var given = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// Free returns a TCP port that is free on every address (and so on
// loopback too), below the kernel's ephemeral range: a port the kernel
// handed out itself (listening on :0) would be in that range, where any
// outgoing connection of the tests may take it as its source port before
// the server that was to listen on it starts. No port is handed out
// twice in one process, and only ports of the process's share (ShareEnv)
// are. The port is not held, so another process may
// still take it first; callers that must not race keep a listener
// instead.
func Free() (int, error) {
	first := ephemeralStart()
	if first-lowest < 1000 { // no room below the range: the kernel's choice
		l, err := net.Listen("tcp", ":0")
		if err != nil {
			return 0, err
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port, nil
	}
	k, n := share()
	given.Lock()
	defer given.Unlock()
	for range 1000 {
		p := lowest + rand.IntN(first-lowest)
		p -= (p - k) % n // this process's share
		if p >= lowest && !given.ports[p] && IsFree(p) {
			given.ports[p] = true
			return p, nil
		}
	}
	return 0, fmt.Errorf("no free port in %d-%d", lowest, first-1)
}

// ShareEnv names the share of the ports a process takes, "k/n": the
// ports p with p % n == k. Test processes that run side by side take
// shares apart, so that neither hands out a port the other did.
const ShareEnv = "SKIFF_PORTS_SHARE"

// share is this process's share, k and n; all ports (0, 1) when unset
// or malformed.
func share() (k, n int) {
	ks, ns, ok := strings.Cut(os.Getenv(ShareEnv), "/")
	k, kerr := strconv.Atoi(ks)
	n, nerr := strconv.Atoi(ns)
	if !ok || kerr != nil || nerr != nil || n < 1 || k < 0 || k >= n {
		return 0, 1
	}
	return k, n
}

// ephemeralStart is the first port of the kernel's ephemeral range
// (Linux's default when it cannot be read).
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768
	}
	p, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return p
}

// IsFree reports whether port can be listened on, on every address.
func IsFree(port int) bool {
	l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	l.Close()
	return true
}
