package podcgroups

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

func TestConversions(t *testing.T) {
	for _, tc := range []struct{ milli, shares int64 }{{0, 2}, {1, 2}, {100, 102}, {1000, 1024}, {1000000, 262144}} {
		if got := MilliCPUToShares(tc.milli); int64(got) != tc.shares {
			t.Errorf("shares(%d) = %d, want %d", tc.milli, got, tc.shares)
		}
	}
	for _, tc := range []struct{ milli, quota int64 }{{0, 0}, {5, 1000}, {250, 25000}, {1500, 150000}} {
		if got := MilliCPUToQuota(tc.milli, 100000); got != tc.quota {
			t.Errorf("quota(%d) = %d, want %d", tc.milli, got, tc.quota)
		}
	}
	for _, tc := range []struct{ shares, weight uint64 }{{2, 1}, {1024, 39}, {262144, 10000}} {
		if got := SharesToWeight(tc.shares); got != tc.weight {
			t.Errorf("weight(%d) = %d, want %d", tc.shares, got, tc.weight)
		}
	}
}

func TestContainerResources(t *testing.T) {
	m := &Manager{cfg: Config{CPUCFSQuota: true, CPUCFSQuotaPeriod: 100 * time.Millisecond, Capacity: rl("2", "1000Mi")}, swapAccounting: true}
	cases := []struct {
		name               string
		pod                *v1.Pod
		shares, quota, mem int64
		oom                int64
	}{
		{"guaranteed", podWith("g", v1.ResourceRequirements{Requests: rl("500m", "64Mi"), Limits: rl("500m", "64Mi")}), 512, 50000, 64 << 20, -997},
		{"besteffort", podWith("e", v1.ResourceRequirements{}), 2, 0, 0, 1000},
		{"limit only: shares from the limit", podWith("b", v1.ResourceRequirements{Limits: rl("1", "")}), 1024, 100000, 0, 999},
		{"burstable by memory request", podWith("b", v1.ResourceRequirements{Requests: rl("", "500Mi")}), 2, 0, 0, 500},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := m.ContainerResources(tc.pod, &tc.pod.Spec.Containers[0])
			if r.CpuShares != tc.shares || r.CpuQuota != tc.quota || r.CpuPeriod != 100000 || r.MemoryLimitInBytes != tc.mem || r.OomScoreAdj != tc.oom {
				t.Errorf("got %+v", r)
			}
			if r.MemorySwapLimitInBytes != tc.mem {
				t.Errorf("swap limit %d, want the memory limit", r.MemorySwapLimitInBytes)
			}
		})
	}
	m.cfg.CPUCFSQuota = false
	if r := m.ContainerResources(cases[0].pod, &cases[0].pod.Spec.Containers[0]); r.CpuQuota != 0 || r.CpuPeriod != 0 {
		t.Errorf("cpuCFSQuota false still sets a quota: %+v", r)
	}
}

func TestPodLevelResources(t *testing.T) {
	m := &Manager{cfg: Config{CPUCFSQuota: true}}
	p := podWith("p", v1.ResourceRequirements{}, v1.ResourceRequirements{})
	p.Spec.Resources = &v1.ResourceRequirements{Requests: rl("1", "256Mi"), Limits: rl("2", "512Mi")}
	l := m.PodLimits(p)
	if l.CPUShares == nil || *l.CPUShares != 1024 || l.CPUQuota == nil || *l.CPUQuota != 200000 || l.Memory == nil || *l.Memory != 512<<20 {
		t.Errorf("pod-level limits: %+v", l)
	}
}
