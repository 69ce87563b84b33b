// Package resize does in-place pod resize as the upstream kubelet does:
// it keeps what is allocated to each pod's resizable containers (app
// containers and sidecars) and what the runtime was last told, decides
// whether a pod's new resources fit the node now (allocated), never
// (Infeasible) or later (Deferred, retried in upstream's order when
// resources free up), and reports that in the PodResizePending and
// PodResizeInProgress conditions. The runtime manager applies allocated
// resources to running containers; this package holds no runtime calls.
//
// The flow of one resize: the spec changes (desired) → Manager.Handle
// checks it against allocatable and the other pods' allocations → the
// allocation checkpoint takes it → the pod's sync applies it to the pod
// cgroup and the containers and records each step as actuated → once
// actuated equals allocated for every running container, the resize is
// complete.
package resize

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/skiff-sh/skiff/internal/admission"
	"github.com/skiff-sh/skiff/internal/podspec"
	"github.com/skiff-sh/skiff/internal/qos"
)

// Reasons of the PodResizePending condition, and of PodResizeInProgress
// when applying a resize failed.
const (
	ReasonDeferred   = v1.PodReasonDeferred
	ReasonInfeasible = v1.PodReasonInfeasible
	ReasonError      = v1.PodReasonError
)

// msgStaticPod is upstream's reason a static pod cannot resize.
const msgStaticPod = "In-place resize of static-pods is not supported"

// Resizable calls f with each container that can be resized in place:
// sidecars (restartable init containers) and app containers.
func Resizable(pod *v1.Pod, f func(c *v1.Container)) {
	for i := range pod.Spec.InitContainers {
		if podspec.IsSidecar(&pod.Spec.InitContainers[i]) {
			f(&pod.Spec.InitContainers[i])
		}
	}
	for i := range pod.Spec.Containers {
		f(&pod.Spec.Containers[i])
	}
}

// AllocationOf is the allocation a pod's spec asks for.
func AllocationOf(pod *v1.Pod) Allocation {
	a := Allocation{}
	Resizable(pod, func(c *v1.Container) { a[c.Name] = *c.Resources.DeepCopy() })
	return a
}

// WithAllocation returns pod with its resizable containers' resources as
// allocated, and whether they differed from the spec's (then pod is a copy).
func WithAllocation(pod *v1.Pod, a Allocation) (*v1.Pod, bool) {
	differs := false
	Resizable(pod, func(c *v1.Container) {
		if r, ok := a[c.Name]; ok && !equality.Semantic.DeepEqual(c.Resources, r) {
			differs = true
		}
	})
	if !differs {
		return pod, false
	}
	out := pod.DeepCopy()
	Resizable(out, func(c *v1.Container) {
		if r, ok := a[c.Name]; ok {
			c.Resources = *r.DeepCopy()
		}
	})
	return out, true
}

// Check decides whether the resize of desired can be allocated now, given
// the other active pods as allocated and the node's allocatable (nil: no
// Node known, so nothing to check against). It returns "" when it can,
// else upstream's reason and message: Infeasible when the pod alone does
// not fit, Deferred when the others leave too little.
func Check(desired *v1.Pod, others []*v1.Pod, allocatable v1.ResourceList, static bool) (reason, message string) {
	if static {
		return ReasonInfeasible, msgStaticPod
	}
	if allocatable == nil {
		return "", ""
	}
	req := resourcehelper.PodRequests(desired, resourcehelper.PodResourcesOptions{})
	cpu, mem := req.Cpu().MilliValue(), req.Memory().Value()
	cpuCap, memCap := allocatable.Cpu().MilliValue(), allocatable.Memory().Value()
	switch {
	case mem > memCap:
		return ReasonInfeasible, fmt.Sprintf("Node didn't have enough capacity: memory, requested: %d, capacity: %d", mem, memCap)
	case cpu > cpuCap:
		return ReasonInfeasible, fmt.Sprintf("Node didn't have enough capacity: cpu, requested: %d, capacity: %d", cpu, cpuCap)
	}
	rest := make([]*v1.Pod, 0, len(others))
	for _, p := range others {
		if p.UID != desired.UID {
			rest = append(rest, p)
		}
	}
	if r := admission.Fit(allocatable, desired, rest); !r.Admit {
		return ReasonDeferred, r.Message
	}
	return "", ""
}

// IncreasesRequests reports whether desired asks for more CPU or memory
// than allocated.
func IncreasesRequests(desired, allocated *v1.Pod) bool {
	want := resourcehelper.PodRequests(desired, resourcehelper.PodResourcesOptions{})
	have := resourcehelper.PodRequests(allocated, resourcehelper.PodResourcesOptions{})
	return want.Cpu().Cmp(*have.Cpu()) > 0 || want.Memory().Cmp(*have.Memory()) > 0
}

// Waiting is a pod with a pending resize, as the retry order sees it.
type Waiting struct {
	Pod *v1.Pod
	// Increasing: the resize asks for more than is allocated.
	Increasing bool
	// Since is when its PodResizePending condition last changed; zero
	// without one.
	Since time.Time
}

// Before orders pending resizes as upstream retries them: those that do
// not grow requests first (they always fit), then higher priority, then
// Guaranteed before other QoS classes, then the longest pending.
func Before(a, b Waiting) bool {
	if a.Increasing != b.Increasing {
		return !a.Increasing
	}
	pa, pb := priority(a.Pod), priority(b.Pod)
	if pa != pb {
		return pa > pb
	}
	ga, gb := qos.Class(a.Pod) == v1.PodQOSGuaranteed, qos.Class(b.Pod) == v1.PodQOSGuaranteed
	if ga != gb {
		return ga
	}
	switch {
	case a.Since.IsZero():
		return false
	case b.Since.IsZero():
		return true
	}
	return a.Since.Before(b.Since)
}

func priority(p *v1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}

// Change is how one running container must move from its actuated
// resources to its allocated ones.
type Change struct {
	// Restart: a changed resource's resize policy is RestartContainer.
	Restart bool
	// CPU and Memory: that resource changes in place.
	CPU, Memory bool
}

// None reports whether nothing changes.
func (c Change) None() bool { return !c.Restart && !c.CPU && !c.Memory }

// Plan compares a container's allocated resources (c's) with its actuated
// ones, under its resize policy (NotRequired unless said otherwise).
func Plan(c *v1.Container, actuated v1.ResourceRequirements) Change {
	alloc := c.Resources
	cpu := alloc.Requests.Cpu().MilliValue() != actuated.Requests.Cpu().MilliValue() ||
		alloc.Limits.Cpu().MilliValue() != actuated.Limits.Cpu().MilliValue()
	mem := alloc.Requests.Memory().Value() != actuated.Requests.Memory().Value() ||
		alloc.Limits.Memory().Value() != actuated.Limits.Memory().Value()
	if (cpu && restartPolicy(c, v1.ResourceCPU)) || (mem && restartPolicy(c, v1.ResourceMemory)) {
		return Change{Restart: true}
	}
	return Change{CPU: cpu, Memory: mem}
}

func restartPolicy(c *v1.Container, name v1.ResourceName) bool {
	for _, p := range c.ResizePolicy {
		if p.ResourceName == name {
			return p.RestartPolicy == v1.RestartContainer
		}
	}
	return false
}
