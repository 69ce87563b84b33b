package metrics

import "github.com/prometheus/client_golang/prometheus"

// draBuckets are upstream's: 0.1 s to 40 s (under the 45 s call
// deadline), 15 exponential buckets.
var draBuckets = prometheus.ExponentialBucketsRange(.1, 40, 15)

// DRAMetrics are the Dynamic Resource Allocation metrics, upstream's
// dra_operations_duration_seconds and dra_grpc_operations_duration_seconds.
type DRAMetrics struct {
	// Operations by operation_name (PrepareResources, UnprepareResources)
	// and is_error.
	Operations *prometheus.HistogramVec
	// GRPC are the calls to drivers by driver_name, method_name (the
	// full gRPC method) and grpc_status_code.
	GRPC *prometheus.HistogramVec
}

func (m *DRAMetrics) init() []prometheus.Collector {
	m.Operations = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: "dra", Name: "operations_duration_seconds",
		Help:    "Latency histogram in seconds for the duration of handling all ResourceClaims referenced by a pod when the pod starts or stops. Identified by the name of the operation (PrepareResources or UnprepareResources) and separated by the success of the operation. The number of failed operations is provided through the histogram's overall count.",
		Buckets: draBuckets,
	}, []string{"operation_name", "is_error"})
	m.GRPC = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: "dra", Name: "grpc_operations_duration_seconds",
		Help:    "Duration in seconds of the DRA gRPC operations",
		Buckets: draBuckets,
	}, []string{"driver_name", "method_name", "grpc_status_code"})
	return []prometheus.Collector{m.Operations, m.GRPC}
}
