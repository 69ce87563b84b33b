package server

import (
	"net/http"

	"github.com/skiff-sh/skiff/internal/metrics"
)

// registerMetrics adds /metrics (the kubelet's own metrics with the Go
// runtime and process collectors) and /metrics/probes. Both servers serve
// them, as upstream does.
func registerMetrics(mux *http.ServeMux) {
	mux.Handle("GET /metrics", metrics.Handler())
	mux.Handle("GET /metrics/probes", metrics.ProbesHandler())
}
