package podcgroups

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/qos"
)

// Setting is one pod cgroup setting a resize changes on its own, in the
// order upstream's safe order needs.
type Setting int

const (
	SettingCPUShares Setting = iota // from the CPU requests
	SettingCPUQuota                 // from the CPU limits
	SettingMemory                   // the memory limit
)

// SetPodSetting writes one setting of the pod cgroup from the pod's
// resources (its allocated ones during a resize), leaving the others as
// they are; new CPU requests of a Burstable pod also move the burstable
// cgroup's shares.
func (m *Manager) SetPodSetting(pod *v1.Pod, s Setting) error {
	if !m.cfg.PerQOS {
		return nil
	}
	all := m.PodLimits(pod)
	var l Limits
	switch s {
	case SettingCPUShares:
		l.CPUShares = all.CPUShares
	case SettingCPUQuota:
		l.CPUQuota, l.CPUPeriod = all.CPUQuota, all.CPUPeriod
	case SettingMemory:
		l.Memory = all.Memory
	}
	name := m.PodCgroupParent(pod)
	if err := m.fs.apply(name, l); err != nil {
		return fmt.Errorf("resize pod cgroup %s: %w", name, err)
	}
	if s == SettingCPUShares && qos.Class(pod) == v1.PodQOSBurstable {
		m.mu.Lock()
		m.burstable[pod.UID] = podCPURequest(pod)
		m.mu.Unlock()
		return m.updateBurstable()
	}
	return nil
}

// PodMemoryUsage is the pod cgroup's memory usage, page cache included
// (memory.usage_in_bytes, memory.current on v2): what upstream's check
// of a lower memory limit reads (cAdvisor's usage, not the working set).
func (m *Manager) PodMemoryUsage(pod *v1.Pod) (int64, error) {
	usageFile := "memory.usage_in_bytes"
	if m.fs.version() == 2 {
		usageFile = "memory.current"
	}
	b, err := os.ReadFile(filepath.Join(m.fs.memoryDir(m.PodCgroupParent(pod)), usageFile))
	if err != nil {
		return 0, fmt.Errorf("read pod memory usage: %w", err)
	}
	usage, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", usageFile, err)
	}
	return usage, nil
}
