package stats

import (
	"context"
	"path/filepath"
	"time"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// podsContainer is the "pods" system container: the cgroup of all pods
// (kubepods) with the memory its limit leaves, which upstream's eviction
// manager reads as allocatableMemory.available. Nil without a limit.
func (p *Provider) podsContainer(t time.Time) *statsapi.ContainerStats {
	if p.cfg.PodsCgroup == "" {
		return nil
	}
	m, err := p.host.cg.read(p.cfg.PodsCgroup)
	if err != nil {
		return nil
	}
	limit, ok := p.host.cg.memoryLimit(p.cfg.PodsCgroup)
	if !ok {
		return nil
	}
	ms := memoryStats(t, &m, 0)
	ms.AvailableBytes = ptr(sub(limit, m.workingSet))
	return &statsapi.ContainerStats{Name: statsapi.SystemContainerPods, Memory: ms}
}

// memoryLimit is the cgroup's memory limit, false when it has none.
func (c cgroups) memoryLimit(path string) (uint64, bool) {
	file := filepath.Join(c.root, "memory", path, "memory.limit_in_bytes")
	if c.v2 {
		file = filepath.Join(c.root, path, "memory.max")
	}
	v, err := readUint(file) // v2's "max" fails to parse: no limit
	// v1 reports no limit as a huge page-aligned number.
	if err != nil || v >= 1<<62 {
		return 0, false
	}
	return v, true
}

// FreshSummary is Summary from a sample at most maxAge old, sampling
// anew if the last one is older: the eviction manager acts on it.
func (p *Provider) FreshSummary(ctx context.Context, maxAge time.Duration) (*statsapi.Summary, error) {
	p.mu.RLock()
	s := p.snap
	p.mu.RUnlock()
	if s == nil || p.now().Sub(s.t) > maxAge {
		if err := p.Sample(ctx); err != nil {
			return nil, err
		}
	}
	return p.Summary(ctx, false)
}

// pids is the number of tasks in the cgroup, nil if unknown.
func (c cgroups) pids(path string) *uint64 {
	file := filepath.Join(c.root, "pids", path, "pids.current")
	if c.v2 {
		file = filepath.Join(c.root, path, "pids.current")
	}
	v, err := readUint(file)
	if err != nil {
		return nil
	}
	return &v
}
