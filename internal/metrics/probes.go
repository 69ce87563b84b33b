package metrics

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
	compbase "k8s.io/component-base/metrics"
)

// proberMetrics are /metrics/probes': upstream's, made with
// component-base like upstream's, so their help texts carry the same
// stability prefixes.
type proberMetrics struct {
	results  *compbase.CounterVec
	duration *compbase.HistogramVec
}

func (m *proberMetrics) init() []compbase.Registerable {
	m.results = compbase.NewCounterVec(&compbase.CounterOpts{
		Subsystem: "prober", Name: "probe_total",
		Help:           "Cumulative number of a liveness, readiness or startup probe for a container by result.",
		StabilityLevel: compbase.BETA,
	}, []string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"})
	m.duration = compbase.NewHistogramVec(&compbase.HistogramOpts{
		Subsystem: "prober", Name: "probe_duration_seconds",
		Help:           "Duration in seconds for a probe response.",
		Buckets:        compbase.DefBuckets,
		StabilityLevel: compbase.ALPHA,
	}, []string{"probe_type", "container", "pod", "namespace"})
	return []compbase.Registerable{m.results, m.duration}
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

func (t ProbeTarget) resultLabels(result string) map[string]string {
	return map[string]string{"probe_type": t.ProbeType, "result": result, "container": t.Container,
		"pod": t.Pod, "namespace": t.Namespace, "pod_uid": string(t.PodUID)}
}

func (t ProbeTarget) durationLabels() map[string]string {
	return map[string]string{"probe_type": t.ProbeType, "container": t.Container, "pod": t.Pod, "namespace": t.Namespace}
}

// ObserveProbe counts one probe run by its result (ProbeSuccessful,
// ProbeFailed or ProbeUnknown).
func (r *Registry) ObserveProbe(t ProbeTarget, result string) {
	r.prober.results.With(t.resultLabels(result)).Inc()
}

// ObserveProbeDuration records how long a probe took to answer.
func (r *Registry) ObserveProbeDuration(t ProbeTarget, took time.Duration) {
	r.prober.duration.With(t.durationLabels()).Observe(took.Seconds())
}

// ForgetProbe drops the series of one probe of a container, as upstream's
// probe worker does when it stops: a pod's series go with its workers.
func (r *Registry) ForgetProbe(t ProbeTarget) {
	for _, result := range []string{ProbeSuccessful, ProbeFailed, ProbeUnknown} {
		r.prober.results.Delete(t.resultLabels(result))
	}
	r.prober.duration.Delete(t.durationLabels())
}
