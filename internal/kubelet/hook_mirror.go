package kubelet

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// mirrorPodHook keeps a static pod's mirror pod in the apiserver. A
// mirror pod that could not be made is made on a later sync: it does not
// hold the pod back. Housekeeping deletes mirror pods of gone static pods.
type mirrorPodHook struct{ cluster cluster }

func (mirrorPodHook) Name() string { return "mirror pod" }

func (h mirrorPodHook) Prepare(ctx context.Context, pod *v1.Pod) error {
	if !IsStaticPod(pod) {
		return nil
	}
	if err := h.cluster.syncMirrorPod(ctx, pod); err != nil {
		klog.ErrorS(err, "Failed to sync mirror pod", "pod", klog.KObj(pod))
	}
	return nil
}
