package kubelet

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/container"
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

// newStartupTracker records pods' starts as histograms on /metrics and,
// if asked, as one Event per pod.
func newStartupTracker(cfg Config, rec podruntime.Recorder, clk clock.PassiveClock) *podstartup.Tracker {
	c := podstartup.Config{Metrics: cfg.Metrics, Clock: clk}
	if cfg.PodStartupBreakdownEvents {
		c.Events = rec
	}
	return podstartup.New(c)
}
