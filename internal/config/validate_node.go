package config

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/cpuset"
)

func validateImages(c *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	high, low := c.ImageGCHighThresholdPercent, c.ImageGCLowThresholdPercent
	if high != nil {
		errs = add(errs, checkRange(p("imageGCHighThresholdPercent"), int64(*high), 0, 100))
	}
	if low != nil {
		errs = add(errs, checkRange(p("imageGCLowThresholdPercent"), int64(*low), 0, 100))
	}
	if high != nil && low != nil && *low >= *high {
		errs = add(errs, field.Invalid(p("imageGCLowThresholdPercent"), int64(*low),
			fmt.Sprintf("must be less than imageGCHighThresholdPercent (%d)", *high)))
	}
	errs = add(errs,
		checkNonNegativeDuration(p("imageMinimumGCAge"), c.ImageMinimumGCAge),
		checkNonNegativeDuration(p("imageMaximumGCAge"), c.ImageMaximumGCAge),
	)
	if c.ImageMaximumGCAge.Duration > 0 && c.ImageMaximumGCAge.Duration <= c.ImageMinimumGCAge.Duration {
		errs = add(errs, field.Invalid(p("imageMaximumGCAge"), c.ImageMaximumGCAge.Duration.String(),
			fmt.Sprintf("must be greater than imageMinimumGCAge (%s)", c.ImageMinimumGCAge.Duration)))
	}
	if m := c.MaxParallelImagePulls; m != nil {
		if *m < 1 {
			errs = add(errs, field.Invalid(p("maxParallelImagePulls"), int64(*m), "must be greater than 0"))
		}
		if *m > 1 && c.SerializeImagePulls != nil && *c.SerializeImagePulls {
			errs = add(errs, field.Invalid(p("maxParallelImagePulls"), int64(*m), "must be 1 unless serializeImagePulls is false"))
		}
	}
	if c.NodeStatusMaxImages != nil && *c.NodeStatusMaxImages < -1 {
		errs = add(errs, field.Invalid(p("nodeStatusMaxImages"), int64(*c.NodeStatusMaxImages), "must be -1 or greater"))
	}
	return errs
}

func validatePodLimits(c *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	errs = add(errs,
		checkNonNegative(p("maxPods"), int64(c.MaxPods)),
		checkNonNegative(p("podsPerCore"), int64(c.PodsPerCore)),
		checkNonNegative(p("maxOpenFiles"), c.MaxOpenFiles),
		checkNonNegative(p("evictionMaxPodGracePeriod"), int64(c.EvictionMaxPodGracePeriod)),
	)
	if c.PodPidsLimit != nil && *c.PodPidsLimit < -1 {
		errs = add(errs, field.Invalid(p("podPidsLimit"), *c.PodPidsLimit, "must be -1 or greater"))
	}
	if c.OOMScoreAdj != nil {
		errs = add(errs, checkRange(p("oomScoreAdj"), int64(*c.OOMScoreAdj), -1000, 1000))
	}
	if c.ContainerLogMaxSize != "" {
		if q, err := resource.ParseQuantity(c.ContainerLogMaxSize); err != nil {
			errs = add(errs, field.Invalid(p("containerLogMaxSize"), c.ContainerLogMaxSize, err.Error()))
		} else if q.Sign() <= 0 {
			errs = add(errs, field.Invalid(p("containerLogMaxSize"), c.ContainerLogMaxSize, "must be greater than 0"))
		}
	}
	if c.ContainerLogMaxFiles != nil && *c.ContainerLogMaxFiles < 2 {
		errs = add(errs, field.Invalid(p("containerLogMaxFiles"), int64(*c.ContainerLogMaxFiles), "must be 2 or greater"))
	}
	if c.ContainerLogMaxWorkers != nil && *c.ContainerLogMaxWorkers < 1 {
		errs = add(errs, field.Invalid(p("containerLogMaxWorkers"), int64(*c.ContainerLogMaxWorkers), "must be 1 or greater"))
	}
	if c.ContainerLogMonitorInterval != nil && c.ContainerLogMonitorInterval.Duration.Seconds() < 3 {
		errs = add(errs, field.Invalid(p("containerLogMonitorInterval"), c.ContainerLogMonitorInterval.Duration.String(), "must be 3s or longer"))
	}
	errs = add(errs, validatePodLogsDir(c.PodLogsDir))
	return errs
}

// validatePodLogsDir: the directory ends up in metric labels and path
// comparisons, so upstream wants it absolute, clean and ASCII.
func validatePodLogsDir(dir string) *field.Error {
	path := p("podLogsDir")
	switch {
	case dir == "":
		return field.Required(path, "")
	case !filepath.IsAbs(dir):
		return field.Invalid(path, dir, "must be an absolute path")
	case filepath.Clean(dir) != dir:
		return field.Invalid(path, dir, "must be a clean path")
	}
	for _, r := range dir {
		if r > unicode.MaxASCII {
			return field.Invalid(path, dir, "must contain ASCII characters only")
		}
	}
	return nil
}

func validateCgroups(c *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	errs = add(errs, checkOneOf(p("cgroupDriver"), c.CgroupDriver, "cgroupfs", "systemd"))
	if c.SystemCgroups != "" && c.CgroupRoot == "" {
		errs = add(errs, field.Invalid(p("systemCgroups"), c.SystemCgroups, "requires cgroupRoot to be set"))
	}
	if period := durationOf(c.CPUCFSQuotaPeriod); c.CPUCFSQuotaPeriod != nil {
		if !gateEnabled(c, gateCustomCPUCFSQuotaPeriod) && period != defaultCPUCFSQuotaPeriodDuration {
			errs = add(errs, field.Invalid(p("cpuCFSQuotaPeriod"), period.String(), "requires feature gate "+gateCustomCPUCFSQuotaPeriod))
		}
		if gateEnabled(c, gateCustomCPUCFSQuotaPeriod) && (period < 1e6 || period > 1e9) {
			errs = add(errs, field.Invalid(p("cpuCFSQuotaPeriod"), period.String(), "must be between 1ms and 1s"))
		}
	}
	return errs
}

func validateManagers(c *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	errs = add(errs,
		checkOneOf(p("cpuManagerPolicy"), c.CPUManagerPolicy, "none", "static"),
		checkOneOf(p("memoryManagerPolicy"), c.MemoryManagerPolicy,
			kubeletconfigv1beta1.NoneMemoryManagerPolicy, kubeletconfigv1beta1.StaticMemoryManagerPolicy),
		checkOneOf(p("topologyManagerPolicy"), c.TopologyManagerPolicy,
			kubeletconfigv1beta1.NoneTopologyManagerPolicy, kubeletconfigv1beta1.BestEffortTopologyManagerPolicy,
			kubeletconfigv1beta1.RestrictedTopologyManagerPolicy, kubeletconfigv1beta1.SingleNumaNodeTopologyManagerPolicy),
		checkOneOf(p("topologyManagerScope"), c.TopologyManagerScope,
			kubeletconfigv1beta1.ContainerTopologyManagerScope, kubeletconfigv1beta1.PodTopologyManagerScope),
		checkOneOf(p("hairpinMode"), c.HairpinMode,
			kubeletconfigv1beta1.HairpinNone, kubeletconfigv1beta1.HairpinVeth, kubeletconfigv1beta1.PromiscuousBridge),
		checkOneOf(p("configMapAndSecretChangeDetectionStrategy"), c.ConfigMapAndSecretChangeDetectionStrategy,
			kubeletconfigv1beta1.GetChangeDetectionStrategy, kubeletconfigv1beta1.TTLCacheChangeDetectionStrategy,
			kubeletconfigv1beta1.WatchChangeDetectionStrategy),
		checkOneOf(p("memorySwap", "swapBehavior"), c.MemorySwap.SwapBehavior, "", "NoSwap", "LimitedSwap"),
	)
	if c.IPTablesMasqueradeBit != nil {
		errs = add(errs, checkRange(p("iptablesMasqueradeBit"), int64(*c.IPTablesMasqueradeBit), 0, 31))
	}
	if c.IPTablesDropBit != nil {
		errs = add(errs, checkRange(p("iptablesDropBit"), int64(*c.IPTablesDropBit), 0, 31))
	}
	if f := c.MemoryThrottlingFactor; f != nil && (*f <= 0 || *f > 1) {
		errs = add(errs, field.Invalid(p("memoryThrottlingFactor"), *f, "must be greater than 0 and at most 1"))
	}
	if c.ReservedSystemCPUs != "" {
		if c.SystemReservedCgroup != "" || c.KubeReservedCgroup != "" {
			errs = add(errs, field.Invalid(p("reservedSystemCPUs"), c.ReservedSystemCPUs,
				"cannot be used with systemReservedCgroup or kubeReservedCgroup"))
		}
		if _, err := cpuset.Parse(c.ReservedSystemCPUs); err != nil {
			errs = add(errs, field.Invalid(p("reservedSystemCPUs"), c.ReservedSystemCPUs, err.Error()))
		}
	}
	return errs
}

// Keys of enforceNodeAllocatable, as upstream spells them.
const (
	enforcePods                       = "pods"
	enforceSystemReserved             = "system-reserved"
	enforceSystemReservedCompressible = "system-reserved-compressible"
	enforceKubeReserved               = "kube-reserved"
	enforceKubeReservedCompressible   = "kube-reserved-compressible"
	enforceNone                       = "none"
)

func validateNodeAllocatable(c *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	path := p("enforceNodeAllocatable")
	seen := map[string]bool{}
	for i, v := range c.EnforceNodeAllocatable {
		if seen[v] {
			errs = add(errs, field.Duplicate(path.Index(i), v))
			continue
		}
		seen[v] = true
		switch v {
		case enforcePods:
		case enforceSystemReserved, enforceSystemReservedCompressible:
			if c.SystemReservedCgroup == "" {
				errs = add(errs, field.Required(p("systemReservedCgroup"), fmt.Sprintf("must be set when enforceNodeAllocatable contains %q", v)))
			}
		case enforceKubeReserved, enforceKubeReservedCompressible:
			if c.KubeReservedCgroup == "" {
				errs = add(errs, field.Required(p("kubeReservedCgroup"), fmt.Sprintf("must be set when enforceNodeAllocatable contains %q", v)))
			}
		case enforceNone:
			if len(c.EnforceNodeAllocatable) > 1 {
				errs = add(errs, field.Invalid(path.Index(i), v, "must be the only entry"))
			}
			continue
		default:
			errs = add(errs, field.NotSupported(path.Index(i), v, []string{enforcePods, enforceSystemReserved,
				enforceSystemReservedCompressible, enforceKubeReserved, enforceKubeReservedCompressible, enforceNone}))
			continue
		}
		if c.CgroupsPerQOS != nil && !*c.CgroupsPerQOS {
			errs = add(errs, field.Invalid(p("cgroupsPerQOS"), false, fmt.Sprintf("must be true when enforceNodeAllocatable contains %q", v)))
		}
	}
	if seen[enforceSystemReserved] && seen[enforceSystemReservedCompressible] {
		errs = add(errs, field.Invalid(path, c.EnforceNodeAllocatable,
			fmt.Sprintf("%q and %q cannot be used together", enforceSystemReserved, enforceSystemReservedCompressible)))
	}
	if seen[enforceKubeReserved] && seen[enforceKubeReservedCompressible] {
		errs = add(errs, field.Invalid(path, c.EnforceNodeAllocatable,
			fmt.Sprintf("%q and %q cannot be used together", enforceKubeReserved, enforceKubeReservedCompressible)))
	}
	errs = append(errs, validateReservedResources(p("systemReserved"), c.SystemReserved)...)
	errs = append(errs, validateReservedResources(p("kubeReserved"), c.KubeReserved)...)
	for i, r := range c.ReservedMemory {
		rp := p("reservedMemory").Index(i)
		if r.NumaNode < 0 {
			errs = add(errs, field.Invalid(rp.Child("numaNode"), int64(r.NumaNode), "must not be negative"))
		}
		for name, q := range r.Limits {
			if q.Sign() < 0 {
				errs = add(errs, field.Invalid(rp.Child("limits").Key(string(name)), q.String(), "must not be negative"))
			}
		}
	}
	return errs
}

// validateReservedResources mirrors what the kubelet accepts for
// --system-reserved / --kube-reserved.
func validateReservedResources(path *field.Path, m map[string]string) field.ErrorList {
	var errs field.ErrorList
	for _, name := range slices.Sorted(maps.Keys(m)) {
		v := m[name]
		switch name {
		case "cpu", "memory", "ephemeral-storage", "pid":
		default:
			if !strings.HasPrefix(name, "hugepages-") {
				errs = add(errs, field.NotSupported(path.Key(name), name, []string{"cpu", "memory", "ephemeral-storage", "pid"}))
				continue
			}
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			errs = add(errs, field.Invalid(path.Key(name), v, err.Error()))
		} else if q.Sign() < 0 {
			errs = add(errs, field.Invalid(path.Key(name), v, "must not be negative"))
		}
	}
	return errs
}
