package kubelet

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/prober"
)

// proberHook starts a pod's probe workers before its status is computed,
// so that no status says ready unprobed (a terminal pod's workers end at
// once).
type proberHook struct{ prober *prober.Manager }

func (proberHook) Name() string { return "prober" }

func (h proberHook) Prepare(_ context.Context, pod *v1.Pod) error {
	h.prober.AddPod(pod)
	return nil
}

func (h proberHook) Teardown(_ context.Context, ref container.PodRef) error {
	h.prober.RemovePod(ref.UID)
	return nil
}
