package server

import (
	"net/http"

	"github.com/skiff-sh/skiff/internal/metrics"
)

// MetricsRoutes adds /metrics (the kubelet's own metrics with the Go
// runtime and process collectors) and /metrics/probes, both from m. Both
// servers serve them, as upstream does.
func MetricsRoutes(mux *http.ServeMux, m *metrics.Registry) {
	mux.Handle("GET /metrics", m.Handler())
	mux.Handle("GET /metrics/probes", m.ProbesHandler())
}
