package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
)

var probeLabels = []string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"}

// proberMetrics are /metrics/probes'.
type proberMetrics struct {
	results  *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func (m *proberMetrics) init() []prometheus.Collector {
	m.results = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: "prober", Name: "probe_total",
		Help: "Cumulative number of a liveness, readiness or startup probe for a container by result.",
	}, probeLabels)
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: "prober", Name: "probe_duration_seconds",
		Help: "Duration in seconds for a probe response.", Buckets: prometheus.DefBuckets,
	}, []string{"probe_type", "container", "pod", "namespace"})
	return []prometheus.Collector{m.results, m.duration}
}

// Probe results as upstream labels them.
const (
	ProbeSuccessful = "successful"
	ProbeFailed     = "failed"
	ProbeUnknown    = "unknown"
)

// ProbeTarget names the container a probe checks.
type ProbeTarget struct {
	ProbeType string // "Liveness", "Readiness" or "Startup", as upstream
	Namespace string
	Pod       string
	PodUID    types.UID
	Container string
}

// ObserveProbe counts one probe run by its result (ProbeSuccessful,
// ProbeFailed or ProbeUnknown).
func (r *Registry) ObserveProbe(t ProbeTarget, result string) {
	r.prober.results.WithLabelValues(t.ProbeType, result, t.Container, t.Pod, t.Namespace, string(t.PodUID)).Inc()
}

// ObserveProbeDuration records how long a probe took to answer.
func (r *Registry) ObserveProbeDuration(t ProbeTarget, took time.Duration) {
	r.prober.duration.WithLabelValues(t.ProbeType, t.Container, t.Pod, t.Namespace).Observe(took.Seconds())
}

// ForgetPodProbes drops the probe series of a pod that is gone, so they do
// not pile up.
func (r *Registry) ForgetPodProbes(namespace, pod string, uid types.UID) {
	r.prober.results.DeletePartialMatch(prometheus.Labels{"pod_uid": string(uid)})
	r.prober.duration.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "pod": pod})
}
