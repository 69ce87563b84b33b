package payload

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// containerResourceValue returns the value of a resourceFieldRef of a
// downwardAPI volume item: the named container's (or init container's)
// request or limit, in divisor units rounded up.
func containerResourceValue(ref *v1.ResourceFieldSelector, pod *v1.Pod, nodeAllocatable v1.ResourceList) (string, error) {
	c := findContainer(pod, ref.ContainerName)
	if c == nil {
		return "", fmt.Errorf("container %s not found", ref.ContainerName)
	}
	return ContainerResourceValue(ref, c, nodeAllocatable)
}

// ContainerResourceValue returns the value of a resourceFieldRef for the
// container c, in divisor units rounded up. A limit the container does not
// set (or sets to zero) reads as nodeAllocatable's, as upstream's
// MergeContainerResourceLimits makes it; environment variables use this too.
func ContainerResourceValue(ref *v1.ResourceFieldSelector, c *v1.Container, nodeAllocatable v1.ResourceList) (string, error) {
	limits := c.Resources.Limits.DeepCopy()
	if limits == nil {
		limits = v1.ResourceList{}
	}
	// Hugepages are left out: they are never overcommitted, so a
	// container using them always has a limit.
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage} {
		if q, ok := limits[name]; !ok || q.IsZero() {
			if alloc, ok := nodeAllocatable[name]; ok {
				limits[name] = alloc.DeepCopy()
			}
		}
	}
	return resourceValue(ref, c.Resources.Requests, limits)
}

func findContainer(pod *v1.Pod, name string) *v1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	return nil
}

// resourceValue is upstream's ExtractContainerResourceValue.
func resourceValue(ref *v1.ResourceFieldSelector, requests, limits v1.ResourceList) (string, error) {
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	switch ref.Resource {
	case "limits.cpu":
		return cpuIn(limits.Cpu(), divisor), nil
	case "limits.memory":
		return bytesIn(limits.Memory(), divisor), nil
	case "limits.ephemeral-storage":
		return bytesIn(limits.StorageEphemeral(), divisor), nil
	case "requests.cpu":
		return cpuIn(requests.Cpu(), divisor), nil
	case "requests.memory":
		return bytesIn(requests.Memory(), divisor), nil
	case "requests.ephemeral-storage":
		return bytesIn(requests.StorageEphemeral(), divisor), nil
	}
	if name, ok := strings.CutPrefix(ref.Resource, "requests."); ok && isHugePages(name) {
		return bytesIn(requests.Name(v1.ResourceName(name), resource.BinarySI), divisor), nil
	}
	if name, ok := strings.CutPrefix(ref.Resource, "limits."); ok && isHugePages(name) {
		return bytesIn(limits.Name(v1.ResourceName(name), resource.BinarySI), divisor), nil
	}
	return "", fmt.Errorf("unsupported container resource : %v", ref.Resource)
}

func isHugePages(name string) bool { return strings.HasPrefix(name, v1.ResourceHugePagesPrefix) }

// cpuIn counts in millicores so that divisors like 1m work, rounding up:
// 250m with divisor 1 reads "1", with divisor 1m "250".
func cpuIn(q *resource.Quantity, divisor resource.Quantity) string {
	return ceilDiv(q.MilliValue(), divisor.MilliValue())
}

// bytesIn rounds up too: 1.5Mi with divisor 1Mi reads "2".
func bytesIn(q *resource.Quantity, divisor resource.Quantity) string {
	return ceilDiv(q.Value(), divisor.Value())
}

// ceilDiv computes as upstream v1.34 does, in float64, so that huge values
// round the same way.
func ceilDiv(n, d int64) string {
	if d == 0 {
		d = 1 // cannot happen for a validated divisor; never divide by zero
	}
	return strconv.FormatInt(int64(math.Ceil(float64(n)/float64(d))), 10)
}
