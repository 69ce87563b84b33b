package kubelet

import (
	"context"
	"fmt"
	"runtime"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/cri"
	"github.com/skiff-sh/skiff/internal/podcgroups"
)

const cgroupFSRoot = "/sys/fs/cgroup"

// NewPodCgroups sets up the QoS cgroup hierarchy the config asks for, with
// the cgroup driver the runtime uses (the configured one if it won't say).
func NewPodCgroups(ctx context.Context, cfg Config, rt cri.RuntimeConfigGetter) (*podcgroups.Manager, error) {
	kc := cfg.Kubelet
	driver, err := cri.CgroupDriver(ctx, rt, kc.CgroupDriver)
	if err != nil {
		return nil, err
	}
	for _, e := range kc.EnforceNodeAllocatable {
		if e != "pods" && e != "none" {
			return nil, fmt.Errorf("enforceNodeAllocatable %q is not supported by this version of Skiff (only \"pods\")", e)
		}
	}
	memory, err := podcgroups.MemoryCapacity()
	if err != nil {
		return nil, err
	}
	reserved := v1.ResourceList{}
	for _, m := range []map[string]string{kc.SystemReserved, kc.KubeReserved} {
		for name, v := range m {
			q, err := resource.ParseQuantity(v)
			if err != nil {
				return nil, fmt.Errorf("reserved %s=%q: %w", name, v, err)
			}
			sum := reserved[v1.ResourceName(name)]
			sum.Add(q)
			reserved[v1.ResourceName(name)] = sum
		}
	}
	m, err := podcgroups.New(podcgroups.Config{
		Root:        cgroupFSRoot,
		CgroupRoot:  kc.CgroupRoot,
		PerQOS:      ptr.Deref(kc.CgroupsPerQOS, true),
		Driver:      driver,
		EnforcePods: slices.Contains(kc.EnforceNodeAllocatable, "pods"),
		Capacity: v1.ResourceList{
			v1.ResourceCPU:    *resource.NewMilliQuantity(int64(runtime.NumCPU())*1000, resource.DecimalSI),
			v1.ResourceMemory: *resource.NewQuantity(memory, resource.BinarySI),
		},
		Reserved:          reserved,
		CPUCFSQuota:       ptr.Deref(kc.CPUCFSQuota, true),
		CPUCFSQuotaPeriod: kc.CPUCFSQuotaPeriod.Duration,
		PodPidsLimit:      ptr.Deref(kc.PodPidsLimit, -1),
	})
	if err != nil {
		return nil, err
	}
	if err := m.Start(); err != nil {
		return nil, fmt.Errorf("QoS cgroups: %w", err)
	}
	return m, nil
}

// cleanupOrphanedCgroups removes pod cgroups of pods that no source, no
// worker and no runtime sandbox or container knows: left from pods
// removed while Skiff was down. A pod the runtime still runs keeps its.
func (k *Kubelet) cleanupOrphanedCgroups(_ context.Context) {
	uids, err := k.cgroups.PodUIDs()
	if err != nil {
		klog.ErrorS(err, "Cannot list pod cgroups")
		return
	}
	running := map[string]bool{}
	for _, ref := range k.pleg.Pods() {
		running[string(ref.UID)] = true
	}
	for _, uid := range uids {
		if _, wanted := k.pods.get(uid); wanted || k.workers.Has(uid) || running[string(uid)] {
			continue
		}
		if err := k.cgroups.RemovePod(uid); err != nil {
			klog.ErrorS(err, "Failed to remove orphaned pod cgroup", "podUID", uid)
			continue
		}
		klog.InfoS("Removed orphaned pod cgroup", "podUID", uid)
	}
}
