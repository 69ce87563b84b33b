package kubelet

import (
	"context"

	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/metrics"
)

// metricsHook drops a pod's probe series once it is gone.
type metricsHook struct{ m *metrics.Registry }

func (metricsHook) Name() string { return "metrics" }

func (h metricsHook) Teardown(_ context.Context, ref container.PodRef) error {
	h.m.ForgetPodProbes(ref.Namespace, ref.Name, ref.UID)
	return nil
}
