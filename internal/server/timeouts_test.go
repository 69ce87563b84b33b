package server

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	kubeletconfig "k8s.io/kubelet/config/v1beta1"
)

// startServer serves h with these timeouts on a loopback port until the
// test ends, and returns its address.
func startServer(t *testing.T, h http.Handler, to timeouts) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newHTTPServer(h, nil, to)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String()
}

// Both servers have upstream's timeouts and header limit.
func TestServersHaveUpstreamTimeouts(t *testing.T) {
	auth, err := NewAuth(AuthConfig{Authorization: kubeletconfig.KubeletAuthorization{Mode: kubeletconfig.KubeletAuthorizationModeAlwaysAllow}})
	if err != nil {
		t.Fatal(err)
	}
	for name, srv := range map[string]*http.Server{
		"secure":    NewSecure(SecureConfig{Auth: auth, Host: nil}).srv,
		"read-only": NewReadOnly("127.0.0.1:0", nil, nil, nil).srv,
	} {
		if srv.IdleTimeout != 90*time.Second || srv.ReadTimeout != 4*time.Hour || srv.WriteTimeout != 4*time.Hour || srv.MaxHeaderBytes != 1<<20 {
			t.Errorf("%s: idle %s read %s write %s max header %d, want 90s 4h 4h 1MiB",
				name, srv.IdleTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.MaxHeaderBytes)
		}
	}
}

// A keep-alive connection with no request is closed after the idle
// timeout; one in use is not.
func TestIdleConnectionsAreClosed(t *testing.T) {
	addr := startServer(t, okHandler, timeouts{idle: 300 * time.Millisecond, read: time.Minute, write: time.Minute})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	get := func() error {
		if _, err := fmt.Fprintf(c, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return err
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	}
	// In use: a request every 100 ms for a second keeps it open.
	for i := 0; i < 10; i++ {
		if err := get(); err != nil {
			t.Fatalf("request %d on a connection in use: %v", i, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("idle connection: read %v, want EOF (closed by the server)", err)
	}
}

// slowStream writes a line every 100 ms for 1.5 s, flushing each, as a
// followed log does.
var slowStream = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	for i := 0; i < 15; i++ {
		if _, err := fmt.Fprintf(w, "line %d\n", i); err != nil {
			return
		}
		http.NewResponseController(w).Flush()
		select {
		case <-r.Context().Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
})

// A followed log streams past the read and write timeouts; other
// requests are cut at the write timeout, as before.
func TestFollowedLogOutlivesTimeouts(t *testing.T) {
	addr := startServer(t, untilClientLeaves(slowStream), timeouts{idle: time.Minute, read: 400 * time.Millisecond, write: 400 * time.Millisecond})
	lines := func(query string) int {
		resp, err := http.Get("http://" + addr + "/containerLogs/ns/p/c" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Count(string(b), "\n")
	}
	if n := lines("?follow=true"); n != 15 {
		t.Errorf("followed log: %d of 15 lines", n)
	}
	if n := lines("?follow=false"); n >= 15 {
		t.Errorf("a request that does not follow got all %d lines past the write timeout", n)
	}
}

// A hijacked (upgraded) connection, as exec, attach and port-forward
// use, outlives the read and write timeouts.
func TestUpgradedStreamOutlivesTimeouts(t *testing.T) {
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		_ = brw.Flush()
		for {
			line, err := brw.ReadString('\n')
			if err != nil {
				return
			}
			_, _ = brw.WriteString("echo:" + line)
			_ = brw.Flush()
		}
	})
	addr := startServer(t, echo, timeouts{idle: 200 * time.Millisecond, read: 300 * time.Millisecond, write: 300 * time.Millisecond})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	fmt.Fprintf(c, "GET /exec/ns/p/c HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	for i := 0; i < 4; i++ {
		time.Sleep(400 * time.Millisecond) // past every timeout, silent
		fmt.Fprintf(c, "ping %d\n", i)
		if line, err := br.ReadString('\n'); err != nil || line != fmt.Sprintf("echo:ping %d\n", i) {
			t.Fatalf("after %d00 ms of silence: %q %v", 4*(i+1), line, err)
		}
	}
}
