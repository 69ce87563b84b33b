//go:build e2e

package e2e

import (
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The read-only port listens on `address`, as upstream, not on loopback
// alone: with address set to the host's IP it answers there, and nothing
// listens on 127.0.0.1 at that port.
func TestReadOnlyPortBindsAddress(t *testing.T) {
	ip := hostIPv4(t)
	n := newPrivateNode(t)
	n.host = ip
	n.setAuth(strings.Replace(standaloneAuth, "address: 127.0.0.1", "address: "+ip, 1))
	n.start()

	if _, err := n.pods(); err != nil {
		t.Fatalf("/pods on %s: %v", ip, err)
	}
	_, err := http.Get("http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port)) + "/healthz")
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("the read-only port on 127.0.0.1: got %v, want connection refused (it binds %s only)", err, ip)
	}
}
