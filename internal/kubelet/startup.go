package kubelet

import (
	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/metrics"
	"github.com/skiff-sh/skiff/internal/podruntime"
	"github.com/skiff-sh/skiff/internal/podstartup"
)

// newStartupTracker records pods' start-up phases as histograms on
// /metrics and, if asked, as one Event per pod.
func newStartupTracker(cfg Config, rec podruntime.Recorder) (*podstartup.Tracker, error) {
	c := podstartup.Config{Registerer: metrics.Registry}
	if cfg.PodStartupBreakdownEvents {
		c.Events = rec
	}
	return podstartup.New(c)
}

func isReady(s v1.PodStatus) bool {
	for _, c := range s.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}
