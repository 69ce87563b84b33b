// Package metrics holds Skiff's Prometheus metrics, named as the upstream
// kubelet names them so dashboards and alerts written for it keep working.
// Each kubelet has one Registry, made by whoever starts it and handed to
// the packages that record: no metric is a process global, so two kubelets
// in one process (as tests start them) count apart, and what /metrics
// serves is exactly what that kubelet recorded.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	compbase "k8s.io/component-base/metrics"
)

const subsystem = "kubelet"

// Upstream's bucket boundaries, so histograms are comparable.
var (
	podStartupBuckets = []float64{0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}
	imagePullBuckets  = []float64{1, 5, 10, 20, 30, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}
)

// Registry is one kubelet's metrics: what /metrics and /metrics/probes
// serve. The exported collectors are recorded into directly.
type Registry struct {
	metrics *prometheus.Registry  // /metrics
	probes  compbase.KubeRegistry // /metrics/probes, apart as upstream keeps it

	NodeName          *prometheus.GaugeVec
	PodWorkerDuration *prometheus.HistogramVec
	PodStart          PodStartMetrics
	PLEG              PLEGMetrics
	Runtime           RuntimeMetrics
	// Evictions counts evictions by signal (kubelet_evictions).
	Evictions *prometheus.CounterVec
	Shutdown  ShutdownMetrics
	DRA       DRAMetrics

	http        httpMetrics
	prober      proberMetrics
	volumeStats volumeStats

	clientCert, servingCert certTTL
	// Failed renewals of the client and serving certificates.
	ClientCertRenewErrors, ServingCertRenewErrors prometheus.Counter
}

// New returns a Registry with every metric registered, the Go runtime and
// process collectors included.
func New() *Registry {
	r := &Registry{metrics: prometheus.NewRegistry(), probes: compbase.NewKubeRegistry()}
	r.NodeName = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: subsystem, Name: "node_name",
		Help: "The node's name. The count is always 1.",
	}, []string{"node"})
	r.PodWorkerDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: subsystem, Name: "pod_worker_duration_seconds",
		Help:    "Duration in seconds to sync a single pod. Broken down by operation type: create, update, sync or kill.",
		Buckets: prometheus.DefBuckets,
	}, []string{"operation_type"})
	r.Evictions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: subsystem, Name: "evictions",
		Help: "Cumulative number of pod evictions by eviction signal",
	}, []string{"eviction_signal"})
	r.metrics.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		r.NodeName, r.PodWorkerDuration, r.Evictions, &r.volumeStats,
	)
	r.metrics.MustRegister(r.PodStart.init()...)
	r.metrics.MustRegister(r.PLEG.init()...)
	r.metrics.MustRegister(r.Runtime.init()...)
	r.metrics.MustRegister(r.http.init()...)
	r.metrics.MustRegister(r.Shutdown.init()...)
	r.metrics.MustRegister(r.DRA.init()...)
	r.metrics.MustRegister(r.certCollectors()...)
	r.probes.MustRegister(r.prober.init()...)
	return r
}

// Handler serves /metrics.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.metrics, promhttp.HandlerOpts{ErrorLog: errorLogger{}})
}

// ProbesHandler serves /metrics/probes.
func (r *Registry) ProbesHandler() http.Handler {
	return compbase.HandlerFor(r.probes, compbase.HandlerOpts{ErrorLog: errorLogger{}})
}

// Gatherers are what /metrics and /metrics/probes serve, for reading
// values back.
func (r *Registry) Gatherers() prometheus.Gatherers {
	return prometheus.Gatherers{r.metrics, r.probes}
}

// SetNodeName records the node's name (the value is always 1).
func (r *Registry) SetNodeName(name string) {
	r.NodeName.Reset()
	r.NodeName.WithLabelValues(name).Set(1)
}
