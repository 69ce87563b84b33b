package server

import (
	"net/http"

	"github.com/skiff-sh/skiff/internal/metrics"
)

// MetricsRoutes adds /metrics (the kubelet's own metrics with the Go
// runtime and process collectors) and /metrics/probes. Both servers serve
// them, as upstream does.
func MetricsRoutes(mux *http.ServeMux) {
	mux.Handle("GET /metrics", metrics.Handler())
	mux.Handle("GET /metrics/probes", metrics.ProbesHandler())
}
