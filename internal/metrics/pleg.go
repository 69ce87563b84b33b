package metrics

import "github.com/prometheus/client_golang/prometheus"

// PLEGMetrics are the PLEG's, with upstream's names, and the running
// pods and containers it counts.
type PLEGMetrics struct {
	RelistDuration prometheus.Histogram
	RelistInterval prometheus.Histogram
	DiscardEvents  prometheus.Counter
	LastSeen       prometheus.Gauge
	// The evented PLEG's: streams that became healthy, streams that broke
	// or could not be had, and the time from an event's creation in the
	// runtime to the PLEG receiving it.
	EventedConn        prometheus.Counter
	EventedConnErr     prometheus.Counter
	EventedConnLatency prometheus.Histogram
	RunningPods        prometheus.Gauge
	RunningContainers  *prometheus.GaugeVec
}

func (m *PLEGMetrics) init() []prometheus.Collector {
	m.RelistDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Subsystem: subsystem, Name: "pleg_relist_duration_seconds",
		Help: "Duration in seconds for relisting pods in PLEG.", Buckets: prometheus.DefBuckets,
	})
	m.RelistInterval = prometheus.NewHistogram(prometheus.HistogramOpts{
		Subsystem: subsystem, Name: "pleg_relist_interval_seconds",
		Help: "Interval in seconds between relisting in PLEG.", Buckets: prometheus.DefBuckets,
	})
	m.DiscardEvents = prometheus.NewCounter(prometheus.CounterOpts{
		Subsystem: subsystem, Name: "pleg_discard_events", Help: "The number of discard events in PLEG.",
	})
	m.LastSeen = prometheus.NewGauge(prometheus.GaugeOpts{
		Subsystem: subsystem, Name: "pleg_last_seen_seconds",
		Help: "Timestamp in seconds when PLEG was last seen active.",
	})
	m.EventedConn = prometheus.NewCounter(prometheus.CounterOpts{
		Subsystem: subsystem, Name: "evented_pleg_connection_success_count",
		Help: "The number of times a streaming client was obtained to receive CRI Events.",
	})
	m.EventedConnErr = prometheus.NewCounter(prometheus.CounterOpts{
		Subsystem: subsystem, Name: "evented_pleg_connection_error_count",
		Help: "The number of errors encountered during the establishment of streaming connection with the CRI runtime.",
	})
	m.EventedConnLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Subsystem: subsystem, Name: "evented_pleg_connection_latency_seconds",
		Help: "The latency of streaming connection with the CRI runtime, measured in seconds.", Buckets: prometheus.DefBuckets,
	})
	m.RunningPods = prometheus.NewGauge(prometheus.GaugeOpts{
		Subsystem: subsystem, Name: "running_pods", Help: "Number of pods that have a running pod sandbox",
	})
	m.RunningContainers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: subsystem, Name: "running_containers", Help: "Number of containers currently running",
	}, []string{"container_state"})
	return []prometheus.Collector{m.RelistDuration, m.RelistInterval, m.DiscardEvents, m.LastSeen,
		m.EventedConn, m.EventedConnErr, m.EventedConnLatency, m.RunningPods, m.RunningContainers}
}
