package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// volumeStats serves the kubelet_volume_stats_* series of the collector
// the kubelet's stats set (SetVolumeStats), which may be replaced when a
// kubelet starts again on the same Registry. It describes nothing, as an
// unchecked collector: the series are the stats collector's to describe.
type volumeStats struct {
	c atomic.Pointer[prometheus.Collector]
}

func (v *volumeStats) Describe(chan<- *prometheus.Desc) {}

func (v *volumeStats) Collect(ch chan<- prometheus.Metric) {
	if c := v.c.Load(); c != nil {
		(*c).Collect(ch)
	}
}

// SetVolumeStats makes /metrics serve the volume stats c collects.
func (r *Registry) SetVolumeStats(c prometheus.Collector) {
	r.volumeStats.c.Store(&c)
}
