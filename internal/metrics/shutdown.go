package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ShutdownMetrics are the graceful node shutdown's times, upstream's
// kubelet_graceful_shutdown_{start,end}_time_seconds.
type ShutdownMetrics struct {
	Start, End prometheus.Gauge
}

func (m *ShutdownMetrics) init() []prometheus.Collector {
	m.Start = prometheus.NewGauge(prometheus.GaugeOpts{
		Subsystem: subsystem, Name: "graceful_shutdown_start_time_seconds",
		Help: "Last graceful shutdown start time since unix epoch in seconds",
	})
	m.End = prometheus.NewGauge(prometheus.GaugeOpts{
		Subsystem: subsystem, Name: "graceful_shutdown_end_time_seconds",
		Help: "Last graceful shutdown end time since unix epoch in seconds",
	})
	return []prometheus.Collector{m.Start, m.End}
}

// Set records a shutdown's start and end; a zero time is 0, as upstream.
func (m *ShutdownMetrics) Set(start, end time.Time) {
	m.Start.Set(unixSeconds(start))
	m.End.Set(unixSeconds(end))
}

func unixSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.Unix())
}
