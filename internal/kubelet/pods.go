package kubelet

import (
	v1 "k8s.io/api/core/v1"
)

// Pods returns every wanted pod with its latest computed status; the
// read-only server's /pods.
func (k *Kubelet) Pods() []*v1.Pod {
	pods := k.pods.pods()
	out := make([]*v1.Pod, 0, len(pods))
	for _, p := range pods {
		p = p.DeepCopy()
		if s, ok := k.statuses.Status(p.UID); ok {
			p.Status = s
		} else {
			p.Status.Phase = v1.PodPending
		}
		out = append(out, p)
	}
	return out
}

// Healthy reports whether the sync loop's inputs are alive.
func (k *Kubelet) Healthy() error { return k.pleg.Healthy() }
