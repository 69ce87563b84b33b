package kubelet

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/metrics"
	"github.com/skiff-sh/skiff/internal/podruntime"
	"github.com/skiff-sh/skiff/internal/podstartup"
)

// startupHook times a pod's start-up phases from its first sync.
type startupHook struct{ tracker *podstartup.Tracker }

func (startupHook) Name() string { return "startup tracking" }

func (h startupHook) Prestart(_ context.Context, pod *v1.Pod, _ *podRun) error {
	h.tracker.SyncStarted(pod.UID)
	return nil
}

func (h startupHook) Teardown(_ context.Context, ref container.PodRef) error {
	h.tracker.Forget(ref.UID)
	return nil
}

// newStartupTracker records pods' start-up phases as histograms on
// /metrics and, if asked, as one Event per pod.
func newStartupTracker(cfg Config, rec podruntime.Recorder, clk clock.PassiveClock) (*podstartup.Tracker, error) {
	c := podstartup.Config{Registerer: metrics.Registry, Clock: clk}
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
