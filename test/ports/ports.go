// Package ports finds free TCP ports for the test control plane, the test
// registry, the end-to-end tests and the benchmark.
package ports

import (
	"net"
	"strconv"
)

// Free asks the kernel for a TCP port that is free on every address (and
// so on loopback too). The port is released before Free returns, so
// another process may take it first; callers that must not race keep the
// listener instead.
func Free() (int, error) {
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
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
