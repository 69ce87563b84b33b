package metrics

import "github.com/prometheus/client_golang/prometheus"

// PodStartMetrics time pods' starts: upstream's three histograms and
// Skiff's own per-phase breakdown (podstartup records all of them).
type PodStartMetrics struct {
	Duration      prometheus.Histogram // kubelet_pod_start_duration_seconds
	SLIDuration   prometheus.Histogram // kubelet_pod_start_sli_duration_seconds
	TotalDuration prometheus.Histogram // kubelet_pod_start_total_duration_seconds
	// Phases and Ready are Skiff's: each phase's duration, and first
	// sight to first Ready.
	Phases *prometheus.HistogramVec
	Ready  prometheus.Histogram
}

// phaseBuckets run from 1 ms to about 65 s.
var phaseBuckets = prometheus.ExponentialBuckets(0.001, 2, 17)

func (m *PodStartMetrics) init() []prometheus.Collector {
	m.Duration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Subsystem: subsystem, Name: "pod_start_duration_seconds",
		Help:    "Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run",
		Buckets: podStartupBuckets,
	})
	m.SLIDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Subsystem: subsystem, Name: "pod_start_sli_duration_seconds",
		Help:    "Duration in seconds to start a pod, excluding time to pull images, measured from pod creation timestamp to when all its containers are reported as started",
		Buckets: podStartupBuckets,
	})
	m.TotalDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Subsystem: subsystem, Name: "pod_start_total_duration_seconds",
		Help:    "Duration in seconds to start a pod since creation, including time to pull images, measured from pod creation timestamp to when all its containers are reported as started",
		Buckets: podStartupBuckets,
	})
	m.Phases = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "skiff_pod_startup_phase_duration_seconds",
		Help:    "Time a pod's start spends in each phase (admission, queue, volumes, sandbox, image, create, start, readiness); per container for image, create and start.",
		Buckets: phaseBuckets,
	}, []string{"phase"})
	m.Ready = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "skiff_pod_startup_duration_seconds",
		Help:    "Time from Skiff first seeing a pod to the pod first being Ready, as computed by Skiff (before the status reaches the apiserver).",
		Buckets: phaseBuckets,
	})
	return []prometheus.Collector{m.Duration, m.SLIDuration, m.TotalDuration, m.Phases, m.Ready}
}
