package kubelet

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/podruntime"
)

// PodCgroups places pods in cgroups; *podcgroups.Manager fits.
type PodCgroups interface {
	podruntime.Resources
	// EnsurePod makes the pod's cgroup with its limits.
	EnsurePod(pod *v1.Pod) error
	// RemovePod removes the pod's cgroup; a missing one is no error.
	RemovePod(uid types.UID) error
	// PodUIDs lists the pods that have a cgroup.
	PodUIDs() ([]types.UID, error)
}

// cgroupsHook makes a pod's cgroup before it runs and removes it once the
// pod is gone.
type cgroupsHook struct{ cgroups PodCgroups }

func (cgroupsHook) Name() string { return "pod cgroup" }

func (h cgroupsHook) Prestart(_ context.Context, pod *v1.Pod, _ *podRun) error {
	return h.cgroups.EnsurePod(pod)
}

func (h cgroupsHook) Teardown(_ context.Context, ref container.PodRef) error {
	if err := h.cgroups.RemovePod(ref.UID); err != nil {
		// Housekeeping retries it as an orphan.
		klog.ErrorS(err, "Failed to remove pod cgroup", "podUID", ref.UID)
	}
	return nil
}
