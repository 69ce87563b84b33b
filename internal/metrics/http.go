package metrics

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var httpLabels = []string{"method", "path", "server_type", "long_running"}

// httpMetrics count and time the requests the servers answer.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inflight *prometheus.GaugeVec
}

func (m *httpMetrics) init() []prometheus.Collector {
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: subsystem, Name: "http_requests_total",
		Help: "Number of the http requests received since the server started",
	}, httpLabels)
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: subsystem, Name: "http_requests_duration_seconds",
		Help: "Duration in seconds to serve http requests", Buckets: prometheus.DefBuckets,
	}, httpLabels)
	m.inflight = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: subsystem, Name: "http_inflight_requests", Help: "Number of the inflight http requests",
	}, httpLabels)
	return []prometheus.Collector{m.requests, m.duration, m.inflight}
}

// Server types as upstream labels them.
const (
	ServerReadOnly  = "readonly"
	ServerReadWrite = "readwrite"
)

// knownPaths bound the path label: anything else is "other", so random
// URLs cannot grow the series without limit.
var knownPaths = map[string]bool{
	"healthz": true, "pods": true, "runningpods": true, "stats": true, "metrics": true,
	"metrics/cadvisor": true, "metrics/probes": true, "metrics/resource": true,
	"containerLogs": true, "logs": true, "exec": true, "attach": true, "portForward": true,
	"run": true, "configz": true, "debug": true, "checkpoint": true,
}

var longRunning = map[string]bool{"exec": true, "attach": true, "portForward": true, "debug": true}

// pathLabel is the first path segment, or two for /metrics/<name>, as upstream.
func pathLabel(p string) string {
	parts := strings.SplitN(strings.TrimPrefix(p, "/"), "/", 3)
	root := parts[0]
	if root == "metrics" && len(parts) > 1 && parts[1] != "" {
		root += "/" + parts[1]
	}
	if !knownPaths[root] {
		return "other"
	}
	return root
}

func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodHead,
		http.MethodPatch, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "other"
}

// InstrumentHandler counts and times the requests h serves on a server of
// serverType (ServerReadOnly or ServerReadWrite).
func (r *Registry) InstrumentHandler(serverType string, h http.Handler) http.Handler {
	m := &r.http
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		path := pathLabel(req.URL.Path)
		labels := prometheus.Labels{
			"method": methodLabel(req.Method), "path": path, "server_type": serverType,
			"long_running": strconv.FormatBool(longRunning[path]),
		}
		m.requests.With(labels).Inc()
		inflight := m.inflight.With(labels)
		inflight.Inc()
		defer inflight.Dec()
		start := time.Now()
		defer func() { m.duration.With(labels).Observe(time.Since(start).Seconds()) }()
		h.ServeHTTP(w, req)
	})
}
