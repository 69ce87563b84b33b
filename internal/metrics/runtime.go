package metrics

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
)

// RuntimeMetrics count what Skiff asks of the runtime: every CRI call,
// pods and containers started, image pulls.
type RuntimeMetrics struct {
	StartedPods             prometheus.Counter
	StartedPodsErrors       prometheus.Counter
	StartedContainers       *prometheus.CounterVec // by container_type
	StartedContainersErrors *prometheus.CounterVec // by container_type and code
	ImagePullDuration       *prometheus.HistogramVec

	operations, operationsErrors *prometheus.CounterVec
	operationsDuration           *prometheus.HistogramVec
}

func (m *RuntimeMetrics) init() []prometheus.Collector {
	m.StartedPods = prometheus.NewCounter(prometheus.CounterOpts{
		Subsystem: subsystem, Name: "started_pods_total", Help: "Cumulative number of pods started",
	})
	m.StartedPodsErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Subsystem: subsystem, Name: "started_pods_errors_total", Help: "Cumulative number of errors when starting pods",
	})
	m.StartedContainers = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: subsystem, Name: "started_containers_total", Help: "Cumulative number of containers started",
	}, []string{"container_type"})
	m.StartedContainersErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: subsystem, Name: "started_containers_errors_total", Help: "Cumulative number of errors when starting containers",
	}, []string{"container_type", "code"})
	m.ImagePullDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: subsystem, Name: "image_pull_duration_seconds",
		Help: "Duration in seconds to pull an image.", Buckets: imagePullBuckets,
	}, []string{"image_size_in_bytes"})
	m.operations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: subsystem, Name: "runtime_operations_total",
		Help: "Cumulative number of runtime operations by operation type.",
	}, []string{"operation_type"})
	m.operationsDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: subsystem, Name: "runtime_operations_duration_seconds",
		Help:    "Duration in seconds of runtime operations. Broken down by operation type.",
		Buckets: prometheus.ExponentialBuckets(.005, 2.5, 14),
	}, []string{"operation_type"})
	m.operationsErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: subsystem, Name: "runtime_operations_errors_total",
		Help: "Cumulative number of runtime operation errors by operation type.",
	}, []string{"operation_type"})
	return []prometheus.Collector{m.StartedPods, m.StartedPodsErrors, m.StartedContainers, m.StartedContainersErrors,
		m.ImagePullDuration, m.operations, m.operationsDuration, m.operationsErrors}
}

// RecordOperation counts one CRI call named op (upstream's names, e.g.
// "create_container") that took d and ended with err.
func (m *RuntimeMetrics) RecordOperation(op string, d time.Duration, err error) {
	m.operations.WithLabelValues(op).Inc()
	m.operationsDuration.WithLabelValues(op).Observe(d.Seconds())
	if err != nil {
		m.operationsErrors.WithLabelValues(op).Inc()
	}
}

// Container types as upstream labels started containers.
const (
	ContainerTypeContainer = "container"
	ContainerTypeInit      = "init_container"
	ContainerTypeEphemeral = "ephemeral_container"
)

// ObserveImagePull records one successful pull of an image of size bytes.
func (m *RuntimeMetrics) ObserveImagePull(d time.Duration, size uint64) {
	m.ImagePullDuration.WithLabelValues(imageSizeLabel(size)).Observe(d.Seconds())
}

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

// errorLogger sends promhttp's gathering errors to klog.
type errorLogger struct{}

func (errorLogger) Println(v ...interface{}) {
	klog.ErrorS(nil, "Serving metrics", "err", fmt.Sprint(v...))
}
