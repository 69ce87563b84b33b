package podstatus

import (
	"math"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/container"
)

// Resize is what a pod's status shows of in-place resize.
type Resize struct {
	// Allocated returns a resizable container's allocated resources;
	// false for the others (regular init and ephemeral containers), which
	// report none.
	Allocated func(name string) (v1.ResourceRequirements, bool)
	// ReportAllocated fills allocatedResources too (the
	// InPlacePodVerticalScalingAllocatedStatus gate, off in 1.34).
	ReportAllocated bool
	// Conditions are PodResizePending and PodResizeInProgress, when set.
	Conditions []v1.PodCondition
}

// The smallest CPU settings the kernel takes: values at or below them on
// both sides read as equal, as upstream.
const (
	minShares        = 2
	minMilliCPULimit = 10
)

// resources fills a container status's resources as upstream does: the
// allocated ones, with the CPU and memory settings the runtime reports
// for a running container in their place; when the runtime reports none,
// the values shown for this same running container before are kept.
func (in *Input) resources(c *v1.Container, s *v1.ContainerStatus, cur *container.ContainerStatus) {
	if in.Resize == nil || in.Resize.Allocated == nil {
		return
	}
	alloc, ok := in.Resize.Allocated(c.Name)
	if !ok {
		return
	}
	if in.Resize.ReportAllocated {
		s.AllocatedResources = alloc.Requests.DeepCopy()
	}
	out := *alloc.DeepCopy()
	s.Resources = &out
	if cur.State != container.StateRunning {
		return
	}
	old := in.oldRunning(c.Name, s.ContainerID)
	rt := cur.Resources
	if out.Limits != nil {
		cpu, mem := cpuLimit(rt), memoryLimit(rt)
		if cpu != nil && (cpu.MilliValue() > minMilliCPULimit || out.Limits.Cpu().MilliValue() > minMilliCPULimit) {
			out.Limits[v1.ResourceCPU] = *cpu
		} else if cpu == nil {
			keep(out.Limits, old, v1.ResourceCPU, true)
		}
		if mem != nil {
			out.Limits[v1.ResourceMemory] = *mem
		} else {
			keep(out.Limits, old, v1.ResourceMemory, true)
		}
	}
	if out.Requests != nil {
		cpu := cpuRequest(rt)
		if cpu != nil && (cpu.MilliValue() > minShares || out.Requests.Cpu().MilliValue() > minShares) {
			out.Requests[v1.ResourceCPU] = *cpu
		} else if cpu == nil {
			keep(out.Requests, old, v1.ResourceCPU, false)
		}
	}
}

// oldRunning is the status reported before for the same running container.
func (in *Input) oldRunning(name, id string) *v1.ContainerStatus {
	for _, l := range [][]v1.ContainerStatus{in.Old.ContainerStatuses, in.Old.InitContainerStatuses} {
		for i := range l {
			if l[i].Name == name && l[i].ContainerID == id && l[i].State.Running != nil && l[i].Resources != nil {
				return &l[i]
			}
		}
	}
	return nil
}

// keep copies a value reported before into list, if there was one.
func keep(list v1.ResourceList, old *v1.ContainerStatus, name v1.ResourceName, limit bool) {
	if old == nil {
		return
	}
	from := old.Resources.Requests
	if limit {
		from = old.Resources.Limits
	}
	if q, ok := from[name]; ok {
		list[name] = q.DeepCopy()
	}
}

func cpuRequest(r *runtimeapi.LinuxContainerResources) *resource.Quantity {
	if r == nil || r.CpuShares <= 0 {
		return nil
	}
	milli := int64(0)
	if r.CpuShares >= minShares {
		milli = int64(math.Ceil(float64(r.CpuShares*1000) / 1024))
	}
	return resource.NewMilliQuantity(milli, resource.DecimalSI)
}

func cpuLimit(r *runtimeapi.LinuxContainerResources) *resource.Quantity {
	if r == nil || r.CpuQuota <= 0 || r.CpuPeriod <= 0 {
		return nil
	}
	return resource.NewMilliQuantity(r.CpuQuota*1000/r.CpuPeriod, resource.DecimalSI)
}

func memoryLimit(r *runtimeapi.LinuxContainerResources) *resource.Quantity {
	if r == nil || r.MemoryLimitInBytes <= 0 {
		return nil
	}
	return resource.NewQuantity(r.MemoryLimitInBytes, resource.BinarySI)
}
