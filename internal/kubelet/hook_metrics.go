package kubelet

import (
	"context"

	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/metrics"
)

// metricsHook drops a pod's start-up and probe series once it is gone.
type metricsHook struct{}

func (metricsHook) Name() string { return "metrics" }

func (metricsHook) Teardown(_ context.Context, ref container.PodRef) error {
	metrics.PodStarts.Forget(ref.UID)
	metrics.ForgetPodProbes(ref.Namespace, ref.Name, ref.UID)
	return nil
}
