package kubelet

import (
	v1 "k8s.io/api/core/v1"
)

// allocatable is the node's allocatable resources, nil before the Node is
// known (or standalone).
func (k *Kubelet) allocatable() v1.ResourceList {
	if n, _ := k.cluster.node(); n != nil {
		return n.Status.Allocatable
	}
	return nil
}

// Latest returns the apiserver's copy of the pod whose status describes
// pod: the mirror pod of a static pod, else the pod itself.
func (k *Kubelet) Latest(pod *v1.Pod) (*v1.Pod, bool) {
	if IsStaticPod(pod) {
		return k.pods.mirrorOf(pod)
	}
	return k.pods.get(pod.UID)
}
