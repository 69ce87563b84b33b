// Package server serves the kubelet's HTTP endpoints.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/metrics"
)

// Provider is what the read-only endpoints show.
type Provider interface {
	Pods() []*v1.Pod
	Healthy() error
}

// ReadOnly is the unauthenticated, read-only server: /healthz, /pods,
// /stats/summary and the metrics endpoints. It listens on loopback only.
type ReadOnly struct {
	addr string
	srv  *http.Server
}

// NewReadOnly returns a server for addr (host:port); sp may be nil.
func NewReadOnly(addr string, p Provider, sp StatsProvider) *ReadOnly {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := p.Healthy(); err != nil {
			http.Error(w, fmt.Sprintf("unhealthy: %v", err), http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, "ok")
	})
	mux.HandleFunc("GET /pods", func(w http.ResponseWriter, r *http.Request) {
		list := v1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
		for _, pod := range p.Pods() {
			list.Items = append(list.Items, *pod)
		}
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(&list); err != nil {
			klog.ErrorS(err, "Writing /pods response failed")
		}
	})
	MetricsRoutes(mux)
	registerStats(mux, sp)
	h := metrics.InstrumentHandler(metrics.ServerReadOnly, mux)
	return &ReadOnly{addr: addr, srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}
}

// Run serves until ctx ends.
func (s *ReadOnly) Run(ctx context.Context) error {
	l, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.addr, err)
	}
	klog.InfoS("Serving read-only API", "address", l.Addr().String())
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.srv.Shutdown(shutdown)
	}()
	if err := s.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve read-only API: %w", err)
	}
	return nil
}
