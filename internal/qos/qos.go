// Package qos computes a pod's QoS class by the Kubernetes rules: Guaranteed
// when every container has CPU and memory limits equal to its requests,
// BestEffort when no container requests or limits either, else Burstable.
package qos

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

var tracked = []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory}

// Class returns the pod's QoS class. Pod-level resources, when set, decide
// alone, as upstream does.
func Class(pod *v1.Pod) v1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	if r := pod.Spec.Resources; r != nil && (len(r.Requests) > 0 || len(r.Limits) > 0) {
		return classOf([]v1.ResourceRequirements{*r})
	}
	var all []v1.ResourceRequirements
	for _, c := range pod.Spec.InitContainers {
		all = append(all, c.Resources)
	}
	for _, c := range pod.Spec.Containers {
		all = append(all, c.Resources)
	}
	return classOf(all)
}

func classOf(rs []v1.ResourceRequirements) v1.PodQOSClass {
	requests, limits := v1.ResourceList{}, v1.ResourceList{}
	guaranteed := true
	for _, r := range rs {
		for _, name := range tracked {
			if q, ok := r.Requests[name]; ok && !q.IsZero() {
				add(requests, name, q)
			}
		}
		seen := 0
		for _, name := range tracked {
			if q, ok := r.Limits[name]; ok && !q.IsZero() {
				add(limits, name, q)
				seen++
			}
		}
		if seen < len(tracked) {
			guaranteed = false
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return v1.PodQOSBestEffort
	}
	if guaranteed {
		for name, req := range requests {
			if lim, ok := limits[name]; !ok || lim.Cmp(req) != 0 {
				guaranteed = false
			}
		}
	}
	if guaranteed && len(requests) == len(limits) {
		return v1.PodQOSGuaranteed
	}
	return v1.PodQOSBurstable
}

func add(l v1.ResourceList, name v1.ResourceName, q resource.Quantity) {
	if cur, ok := l[name]; ok {
		cur.Add(q)
		l[name] = cur
		return
	}
	l[name] = q.DeepCopy()
}
