// Package server serves the kubelet's HTTP endpoints: the read-only API,
// the healthz port and the authenticated kubelet API (Secure).
//
// Authentication (client certificates, TokenReview with its cache),
// authorization (SubjectAccessReview with its cache), the reloading of
// the client CA and serving certificate files, and /healthz are Skiff's
// own small versions of what k8s.io/apiserver provides (its
// authenticator and authorizer factories, dynamiccertificates and
// healthz), and upstream_test.go checks that they answer as those do.
// The reason is measured: through their configuration types and
// validation those packages linked CEL (cel-go, antlr), OpenAPI and more
// of the apiserver; replacing them took Skiff's binary from 82.9 to
// 72.1 MB and its text from 26.6 to 23.5 MB, and the mapped binary is
// most of Skiff's resident memory.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/metrics"
)

// ReadOnly is the unauthenticated, read-only server: /healthz, /pods,
// /stats/summary and the metrics endpoints. It listens on loopback only.
type ReadOnly struct {
	addr string
	srv  *http.Server
}

// NewReadOnly returns a server for addr (host:port) that serves m's
// metrics and counts its requests in m (nil: a registry of its own); sp
// may be nil.
func NewReadOnly(addr string, p Provider, sp StatsProvider, m *metrics.Registry) *ReadOnly {
	if m == nil {
		m = metrics.New()
	}
	mux := http.NewServeMux()
	installCommon(mux, p, sp, m)
	h := m.InstrumentHandler(metrics.ServerReadOnly, mux)
	return &ReadOnly{addr: addr, srv: newHTTPServer(h, nil, upstreamTimeouts)}
}

// Run serves until ctx ends.
func (s *ReadOnly) Run(ctx context.Context) error {
	return serve(ctx, "read-only API", s.addr, s.srv)
}

// Healthz is the healthz port's server (healthzBindAddress:healthzPort):
// /healthz only, with no checks, as upstream's: it says the process
// serves, and nothing more.
type Healthz struct {
	addr string
	srv  *http.Server
}

// NewHealthz returns the healthz server for addr (host:port).
func NewHealthz(addr string) *Healthz {
	mux := http.NewServeMux()
	installHealthz(mux)
	return &Healthz{addr: addr, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
}

// Run serves until ctx ends.
func (s *Healthz) Run(ctx context.Context) error {
	return serve(ctx, "healthz", s.addr, s.srv)
}

// serve listens on addr and serves srv (with TLS when srv.TLSConfig is
// set) until ctx ends.
func serve(ctx context.Context, what, addr string, srv *http.Server) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s: listen on %s: %w", what, addr, err)
	}
	klog.InfoS("Serving "+what, "address", l.Addr().String(), "tls", srv.TLSConfig != nil)
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-ctx.Done():
		case <-stopped:
			return
		}
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if srv.TLSConfig != nil {
		l = tls.NewListener(l, srv.TLSConfig)
	}
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", what, err)
	}
	return nil
}
