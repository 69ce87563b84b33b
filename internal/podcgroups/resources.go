package podcgroups

import (
	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/qos"
)

// Kernel bounds of CPU shares and of the CFS quota, as upstream uses them.
const (
	minShares     = 2
	maxShares     = 262144
	sharesPerCPU  = 1024
	milliPerCPU   = 1000
	minQuotaUsecs = 1000
)

// Limits are the settings of one cgroup; nil fields are left alone.
type Limits struct {
	CPUShares *uint64
	CPUQuota  *int64 // microseconds per period; -1 is unlimited
	CPUPeriod *uint64
	Memory    *int64 // bytes; -1 is unlimited
	Pids      *int64 // -1 is unlimited
}

// MilliCPUToShares converts a CPU request to cgroup v1 cpu.shares.
func MilliCPUToShares(milli int64) uint64 {
	if milli == 0 {
		return minShares
	}
	shares := milli * sharesPerCPU / milliPerCPU
	switch {
	case shares < minShares:
		return minShares
	case shares > maxShares:
		return maxShares
	}
	return uint64(shares)
}

// MilliCPUToQuota converts a CPU limit to a CFS quota for period; 0 means
// no limit.
func MilliCPUToQuota(milli, period int64) int64 {
	if milli == 0 {
		return 0
	}
	quota := milli * period / milliPerCPU
	if quota < minQuotaUsecs {
		quota = minQuotaUsecs
	}
	return quota
}

// SharesToWeight converts cpu.shares to cgroup v2 cpu.weight.
func SharesToWeight(shares uint64) uint64 {
	if shares < minShares {
		shares = minShares
	}
	return 1 + ((shares-minShares)*9999)/(maxShares-minShares)
}

// PodLimits is the pod cgroup's configuration, as upstream computes it:
// shares from the requests; the CFS quota and the memory limit only when
// every container declares a limit of that resource (or the pod has
// pod-level limits); BestEffort pods get the minimum shares.
func (m *Manager) PodLimits(pod *v1.Pod) Limits {
	cpuDeclared, memDeclared := true, true
	opts := resourcehelper.PodResourcesOptions{
		ContainerFn: func(res v1.ResourceList, _ resourcehelper.ContainerType) {
			if res.Cpu().IsZero() {
				cpuDeclared = false
			}
			if res.Memory().IsZero() {
				memDeclared = false
			}
		},
	}
	limits := resourcehelper.PodLimits(pod, opts)
	if r := pod.Spec.Resources; r != nil && len(r.Limits) > 0 {
		limits = r.Limits // pod-level limits win
	}
	if r := pod.Spec.Resources; r != nil {
		if !r.Limits.Cpu().IsZero() {
			cpuDeclared = true
		}
		if !r.Limits.Memory().IsZero() {
			memDeclared = true
		}
	}
	shares := MilliCPUToShares(podCPURequest(pod))
	period := m.period()
	quota := MilliCPUToQuota(limits.Cpu().MilliValue(), int64(period))
	if !m.cfg.CPUCFSQuota || quota == 0 {
		quota = -1
	}
	mem := limits.Memory().Value()
	var out Limits
	switch qos.Class(pod) {
	case v1.PodQOSBestEffort:
		s := uint64(minShares)
		out.CPUShares = &s
	case v1.PodQOSGuaranteed:
		cpuDeclared, memDeclared = true, true
		fallthrough
	default:
		out.CPUShares = &shares
		if cpuDeclared {
			out.CPUQuota, out.CPUPeriod = &quota, &period
		}
		if memDeclared && mem > 0 {
			out.Memory = &mem
		}
	}
	if m.cfg.PodPidsLimit > 0 {
		p := m.cfg.PodPidsLimit
		out.Pids = &p
	}
	return out
}

func (m *Manager) period() uint64 {
	if m.cfg.CPUCFSQuotaPeriod > 0 {
		return uint64(m.cfg.CPUCFSQuotaPeriod.Microseconds())
	}
	return 100000
}

// ContainerResources are a container's CRI resources: shares from its
// request (its limit when it requests none), the CFS quota from its limit,
// its memory limit, and the OOM score its QoS class gets.
func (m *Manager) ContainerResources(pod *v1.Pod, c *v1.Container) *runtimeapi.LinuxContainerResources {
	req, lim := c.Resources.Requests.Cpu(), c.Resources.Limits.Cpu()
	out := &runtimeapi.LinuxContainerResources{CpuShares: int64(MilliCPUToShares(req.MilliValue()))}
	if req.IsZero() && !lim.IsZero() {
		out.CpuShares = int64(MilliCPUToShares(lim.MilliValue()))
	}
	if mem := c.Resources.Limits.Memory().Value(); mem > 0 {
		out.MemoryLimitInBytes = mem
		if m.swapAccounting {
			out.MemorySwapLimitInBytes = mem // no swap, as upstream's NoSwap
		}
	}
	if m.cfg.CPUCFSQuota {
		out.CpuPeriod = int64(m.period())
		out.CpuQuota = MilliCPUToQuota(lim.MilliValue(), out.CpuPeriod)
	}
	out.OomScoreAdj = m.oomScoreAdj(pod, c)
	return out
}

// oomScoreAdj ranks containers for the OOM killer by QoS, as upstream:
// Guaranteed last, BestEffort first, Burstable by its memory request.
func (m *Manager) oomScoreAdj(pod *v1.Pod, c *v1.Container) int64 {
	switch qos.Class(pod) {
	case v1.PodQOSGuaranteed:
		return -997
	case v1.PodQOSBestEffort:
		return 1000
	}
	capacity := m.cfg.Capacity.Memory().Value()
	if capacity <= 0 {
		return 999
	}
	adj := 1000 - (1000*c.Resources.Requests.Memory().Value())/capacity
	switch {
	case adj < 3:
		return 3
	case adj >= 1000:
		return 999
	}
	return adj
}

func podCPURequest(pod *v1.Pod) int64 {
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	return req.Cpu().MilliValue()
}
