// Package metrics holds Skiff's Prometheus metrics, named as the upstream
// kubelet names them so dashboards and alerts written for it keep working.
// Metrics live in package-level collectors on Skiff's own registries (not
// the client library's global one), so other packages record with one call
// and tests can read values back.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

const subsystem = "kubelet"

// Upstream's bucket boundaries, so histograms are comparable.
var (
	podStartupBuckets = []float64{0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}
	imagePullBuckets  = []float64{1, 5, 10, 20, 30, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}
)

// Registry is what /metrics serves.
var Registry = prometheus.NewRegistry()

var (
	NodeName = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: subsystem, Name: "node_name",
		Help: "The node's name. The count is always 1.",
	}, []string{"node"})
	PodWorkerDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: subsystem, Name: "pod_worker_duration_seconds",
		Help:    "Duration in seconds to sync a single pod. Broken down by operation type: create, update, sync or kill.",
		Buckets: prometheus.DefBuckets,
	}, []string{"operation_type"})
	PodStartDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Subsystem: subsystem, Name: "pod_start_duration_seconds",
		Help:    "Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run",
		Buckets: podStartupBuckets,
	})
	PodStartSLIDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Subsystem: subsystem, Name: "pod_start_sli_duration_seconds",
		Help:    "Duration in seconds to start a pod, excluding time to pull images, measured from pod creation timestamp to when all its containers are reported as started",
		Buckets: podStartupBuckets,
	})
	PodStartTotalDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Subsystem: subsystem, Name: "pod_start_total_duration_seconds",
		Help:    "Duration in seconds to start a pod since creation, including time to pull images, measured from pod creation timestamp to when all its containers are reported as started",
		Buckets: podStartupBuckets,
	})
	PLEGRelistDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Subsystem: subsystem, Name: "pleg_relist_duration_seconds",
		Help: "Duration in seconds for relisting pods in PLEG.", Buckets: prometheus.DefBuckets,
	})
	PLEGRelistInterval = prometheus.NewHistogram(prometheus.HistogramOpts{
		Subsystem: subsystem, Name: "pleg_relist_interval_seconds",
		Help: "Interval in seconds between relisting in PLEG.", Buckets: prometheus.DefBuckets,
	})
	PLEGDiscardEvents = prometheus.NewCounter(prometheus.CounterOpts{
		Subsystem: subsystem, Name: "pleg_discard_events", Help: "The number of discard events in PLEG.",
	})
	PLEGLastSeen = prometheus.NewGauge(prometheus.GaugeOpts{
		Subsystem: subsystem, Name: "pleg_last_seen_seconds",
		Help: "Timestamp in seconds when PLEG was last seen active.",
	})
	// The evented PLEG's, with upstream's names: streams that became
	// healthy, streams that broke or could not be had, and the time from
	// an event's creation in the runtime to the PLEG receiving it.
	EventedPLEGConn = prometheus.NewCounter(prometheus.CounterOpts{
		Subsystem: subsystem, Name: "evented_pleg_connection_success_count",
		Help: "The number of times a streaming client was obtained to receive CRI Events.",
	})
	EventedPLEGConnErr = prometheus.NewCounter(prometheus.CounterOpts{
		Subsystem: subsystem, Name: "evented_pleg_connection_error_count",
		Help: "The number of errors encountered during the establishment of streaming connection with the CRI runtime.",
	})
	EventedPLEGConnLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Subsystem: subsystem, Name: "evented_pleg_connection_latency_seconds",
		Help: "The latency of streaming connection with the CRI runtime, measured in seconds.", Buckets: prometheus.DefBuckets,
	})
	RunningPods = prometheus.NewGauge(prometheus.GaugeOpts{
		Subsystem: subsystem, Name: "running_pods", Help: "Number of pods that have a running pod sandbox",
	})
	RunningContainers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: subsystem, Name: "running_containers", Help: "Number of containers currently running",
	}, []string{"container_state"})
	StartedPods = prometheus.NewCounter(prometheus.CounterOpts{
		Subsystem: subsystem, Name: "started_pods_total", Help: "Cumulative number of pods started",
	})
	StartedPodsErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Subsystem: subsystem, Name: "started_pods_errors_total", Help: "Cumulative number of errors when starting pods",
	})
	StartedContainers = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: subsystem, Name: "started_containers_total", Help: "Cumulative number of containers started",
	}, []string{"container_type"})
	StartedContainersErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: subsystem, Name: "started_containers_errors_total", Help: "Cumulative number of errors when starting containers",
	}, []string{"container_type", "code"})
	ImagePullDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: subsystem, Name: "image_pull_duration_seconds",
		Help: "Duration in seconds to pull an image.", Buckets: imagePullBuckets,
	}, []string{"image_size_in_bytes"})
)

func init() {
	Registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		NodeName, PodWorkerDuration, PodStartDuration, PodStartSLIDuration, PodStartTotalDuration,
		PLEGRelistDuration, PLEGRelistInterval, PLEGDiscardEvents, PLEGLastSeen,
		EventedPLEGConn, EventedPLEGConnErr, EventedPLEGConnLatency,
		RunningPods, RunningContainers, StartedPods, StartedPodsErrors,
		StartedContainers, StartedContainersErrors, ImagePullDuration,
		runtimeOperations, runtimeOperationsDuration, runtimeOperationsErrors,
		httpRequests, httpRequestsDuration, httpInflight,
	)
}

// Handler serves /metrics.
func Handler() http.Handler {
	return promhttp.HandlerFor(Registry, promhttp.HandlerOpts{ErrorLog: errorLogger{}})
}

// SetNodeName records the node's name (the value is always 1).
func SetNodeName(name string) {
	NodeName.Reset()
	NodeName.WithLabelValues(name).Set(1)
}

// Container types as upstream labels started containers.
const (
	ContainerTypeContainer = "container"
	ContainerTypeInit      = "init_container"
	ContainerTypeEphemeral = "ephemeral_container"
)

// imageSizeLabel buckets an image size as upstream labels pull durations.
func imageSizeLabel(size uint64) string {
	const mb, gb = 1 << 20, 1 << 30
	bounds := []struct {
		below uint64
		label string
	}{
		{10 * mb, "0-10MB"}, {100 * mb, "10MB-100MB"}, {500 * mb, "100MB-500MB"}, {gb, "500MB-1GB"},
		{5 * gb, "1GB-5GB"}, {10 * gb, "5GB-10GB"}, {20 * gb, "10GB-20GB"}, {30 * gb, "20GB-30GB"},
		{40 * gb, "30GB-40GB"}, {60 * gb, "40GB-60GB"}, {100 * gb, "60GB-100GB"},
	}
	for _, b := range bounds {
		if size < b.below {
			return b.label
		}
	}
	return "GT100GB"
}

// ObserveImagePull records one successful pull of an image of size bytes.
func ObserveImagePull(seconds float64, size uint64) {
	ImagePullDuration.WithLabelValues(imageSizeLabel(size)).Observe(seconds)
}
