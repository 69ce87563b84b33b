// Package admission decides whether a pod the apiserver bound to this node
// may run here, with the upstream kubelet's rules and reasons: the node
// must match the pod's node selector and required node affinity, and the
// pod's requests must fit in what the admitted pods leave of allocatable.
package admission

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// Result says why a pod was rejected; Admit is true when it was not.
type Result struct {
	Admit   bool
	Reason  string // e.g. OutOfcpu, NodeAffinity
	Message string
}

var checked = []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage}

// Admit checks pod against node, given the pods already admitted and active.
func Admit(node *v1.Node, pod *v1.Pod, active []*v1.Pod) Result {
	if ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); err != nil || !ok {
		msg := "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"
		if err != nil {
			msg = fmt.Sprintf("%s: %v", msg, err)
		}
		return Result{Reason: "NodeAffinity", Message: msg}
	}
	return Fit(node.Status.Allocatable, pod, active)
}

// Fit checks the pod's requests (and one more pod) against what the active
// pods leave of allocatable, with upstream's reason and message.
func Fit(alloc v1.ResourceList, pod *v1.Pod, active []*v1.Pod) Result {
	if max, ok := alloc[v1.ResourcePods]; ok && int64(len(active))+1 > max.Value() {
		return insufficient(v1.ResourcePods, 1, int64(len(active)), max.Value())
	}
	want := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	used := v1.ResourceList{}
	for _, p := range active {
		for name, q := range resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}) {
			sum := used[name]
			sum.Add(q)
			used[name] = sum
		}
	}
	for _, name := range checked {
		req, ok := want[name]
		if !ok || req.IsZero() {
			continue
		}
		capacity, ok := alloc[name]
		if !ok {
			continue
		}
		u := used[name]
		if value(name, req)+value(name, u) > value(name, capacity) {
			return insufficient(name, value(name, req), value(name, u), value(name, capacity))
		}
	}
	return Result{Admit: true}
}

// value is a quantity in the unit upstream reports: millicores for CPU.
func value(name v1.ResourceName, q resource.Quantity) int64 {
	if name == v1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

func insufficient(name v1.ResourceName, requested, used, capacity int64) Result {
	return Result{
		Reason: fmt.Sprintf("OutOf%s", name),
		Message: fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d",
			name, requested, used, capacity),
	}
}
