package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/types"
)

// ProbeRegistry is what /metrics/probes serves, apart from /metrics as
// upstream keeps it.
var ProbeRegistry = prometheus.NewRegistry()

var (
	probeLabels   = []string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"}
	proberResults = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: "prober", Name: "probe_total",
		Help: "Cumulative number of a liveness, readiness or startup probe for a container by result.",
	}, probeLabels)
	proberDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: "prober", Name: "probe_duration_seconds",
		Help: "Duration in seconds for a probe response.", Buckets: prometheus.DefBuckets,
	}, []string{"probe_type", "container", "pod", "namespace"})
)

func init() { ProbeRegistry.MustRegister(proberResults, proberDuration) }

// ProbesHandler serves /metrics/probes.
func ProbesHandler() http.Handler {
	return promhttp.HandlerFor(ProbeRegistry, promhttp.HandlerOpts{ErrorLog: errorLogger{}})
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
func ObserveProbe(t ProbeTarget, result string) {
	proberResults.WithLabelValues(t.ProbeType, result, t.Container, t.Pod, t.Namespace, string(t.PodUID)).Inc()
}

// ObserveProbeDuration records how long a probe took to answer.
func ObserveProbeDuration(t ProbeTarget, took time.Duration) {
	proberDuration.WithLabelValues(t.ProbeType, t.Container, t.Pod, t.Namespace).Observe(took.Seconds())
}

// ForgetPodProbes drops the probe series of a pod that is gone, so they do
// not pile up.
func ForgetPodProbes(namespace, pod string, uid types.UID) {
	proberResults.DeletePartialMatch(prometheus.Labels{"pod_uid": string(uid)})
	proberDuration.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "pod": pod})
}
