package metrics

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
)

var (
	runtimeOperations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: subsystem, Name: "runtime_operations_total",
		Help: "Cumulative number of runtime operations by operation type.",
	}, []string{"operation_type"})
	runtimeOperationsDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: subsystem, Name: "runtime_operations_duration_seconds",
		Help:    "Duration in seconds of runtime operations. Broken down by operation type.",
		Buckets: prometheus.ExponentialBuckets(.005, 2.5, 14),
	}, []string{"operation_type"})
	runtimeOperationsErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: subsystem, Name: "runtime_operations_errors_total",
		Help: "Cumulative number of runtime operation errors by operation type.",
	}, []string{"operation_type"})
)

// RecordRuntimeOperation counts one CRI call named op (upstream's names,
// e.g. "create_container") that began at start and ended with err.
func RecordRuntimeOperation(op string, start time.Time, err error) {
	runtimeOperations.WithLabelValues(op).Inc()
	runtimeOperationsDuration.WithLabelValues(op).Observe(time.Since(start).Seconds())
	if err != nil {
		runtimeOperationsErrors.WithLabelValues(op).Inc()
	}
}

// errorLogger sends promhttp's gathering errors to klog.
type errorLogger struct{}

func (errorLogger) Println(v ...interface{}) {
	klog.ErrorS(nil, "Serving metrics", "err", fmt.Sprint(v...))
}
