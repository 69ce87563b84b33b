package stats

import (
	"context"
	"errors"
	"slices"
	"sort"
	"time"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/skiff-sh/skiff/internal/du"
)

// Summary returns the node's and its pods' statistics from the last sample
// (taking one if there is none yet). onlyCPUAndMemory leaves filesystems,
// network, volumes and rlimits out, as upstream's only_cpu_and_memory.
func (p *Provider) Summary(ctx context.Context, onlyCPUAndMemory bool) (*statsapi.Summary, error) {
	p.mu.RLock()
	s, d := p.snap, p.disk
	p.mu.RUnlock()
	if s == nil {
		if err := p.Sample(ctx); err != nil {
			return nil, err
		}
		p.mu.RLock()
		s = p.snap
		p.mu.RUnlock()
	}
	if s.nodeErr != nil {
		return nil, errors.Join(errors.New("read node CPU and memory"), s.nodeErr)
	}
	out := &statsapi.Summary{Node: p.nodeStats(s, onlyCPUAndMemory)}
	for _, ps := range s.pods {
		out.Pods = append(out.Pods, p.podStats(s, ps, d, onlyCPUAndMemory))
	}
	sort.Slice(out.Pods, func(i, j int) bool {
		a, b := out.Pods[i].PodRef, out.Pods[j].PodRef
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
	return out, nil
}

func (p *Provider) nodeStats(s *snapshot, onlyCPUAndMemory bool) statsapi.NodeStats {
	n := statsapi.NodeStats{
		NodeName:  p.cfg.NodeName,
		StartTime: metaTime(s.bootTime),
		CPU: &statsapi.CPUStats{Time: metaTime(s.t), UsageCoreNanoSeconds: ptr(s.node.cpuNanos),
			UsageNanoCores: s.nodeRate},
		Memory: memoryStats(s.t, &s.node, s.memCap),
	}
	if onlyCPUAndMemory {
		return n
	}
	if ifaces, err := netDev(p.cfg.ProcRoot + "/net/dev"); err == nil {
		n.Network = network(s.t, ifaces, s.defaultNIC)
	}
	if info, err := statfs(p.cfg.RootDir); err == nil {
		n.Fs = info.wholeFs(p.now())
	}
	if fs := s.imageFs; fs != nil {
		img := fs.info.fsStats(s.t, fs.used, fs.ino)
		n.Runtime = &statsapi.RuntimeStats{ImageFs: img, ContainerFs: img}
		if c := s.containerFs; c != fs {
			n.Runtime.ContainerFs = c.info.fsStats(s.t, c.used, c.ino)
		}
	}
	n.Rlimit = p.host.rlimit(s.t)
	if c := p.podsContainer(s.t); c != nil {
		n.SystemContainers = append(n.SystemContainers, *c)
	}
	return n
}

// memoryStats turns a reading into MemoryStats; with a capacity (the node),
// availableBytes is what the working set leaves, as upstream.
func memoryStats(t time.Time, m *cpuMem, capacity uint64) *statsapi.MemoryStats {
	ms := &statsapi.MemoryStats{Time: metaTime(t), UsageBytes: ptr(m.usage), WorkingSetBytes: ptr(m.workingSet),
		RSSBytes: ptr(m.rss), PageFaults: ptr(m.pageFaults), MajorPageFaults: ptr(m.majorPageFaults)}
	if capacity > 0 {
		ms.AvailableBytes = ptr(sub(capacity, m.workingSet))
	}
	return ms
}

func (p *Provider) podStats(s *snapshot, ps *podSample, d *diskUsage, onlyCPUAndMemory bool) statsapi.PodStats {
	out := statsapi.PodStats{
		PodRef:    statsapi.PodReference{Name: ps.ref.Name, Namespace: ps.ref.Namespace, UID: string(ps.ref.UID)},
		StartTime: metaTime(ps.start),
		CPU: &statsapi.CPUStats{Time: metaTime(ps.t), UsageCoreNanoSeconds: ptr(ps.cpuMem.cpuNanos),
			UsageNanoCores: ps.rate},
		Memory: memoryStats(ps.t, ps.cpuMem, 0),
	}
	var logs map[string]du.Usage
	if d != nil {
		logs = d.logs[ps.ref.UID]
	}
	var ephemeral, ephemeralIno uint64
	for _, c := range ps.containers {
		cs := statsapi.ContainerStats{Name: c.name, StartTime: metaTime(c.start), CPU: c.cpu, Memory: c.mem}
		if !onlyCPUAndMemory {
			if c.rootfsUsed != nil && s.containerFs != nil {
				cs.Rootfs = s.containerFs.info.fsStats(c.t, c.rootfsUsed, c.rootfsIno)
				ephemeral += *c.rootfsUsed
				ephemeralIno += deref(c.rootfsIno)
			}
			if u, ok := logs[c.name]; ok {
				if info, err := statfs(p.cfg.PodLogsDir); err == nil {
					cs.Logs = info.fsStats(d.t, ptr(u.Bytes), ptr(u.Inodes))
				}
				ephemeral += u.Bytes
				ephemeralIno += u.Inodes
			}
		}
		out.Containers = append(out.Containers, cs)
	}
	sort.Slice(out.Containers, func(i, j int) bool { return out.Containers[i].Name < out.Containers[j].Name })
	if onlyCPUAndMemory {
		return out
	}
	out.Network = network(ps.t, ps.net, "eth0")
	if ps.processes != nil {
		out.ProcessStats = &statsapi.ProcessStats{ProcessCount: ps.processes}
	}
	if d != nil {
		out.VolumeStats = d.volumes[ps.ref.UID]
		for _, v := range out.VolumeStats {
			ephemeral += deref(v.UsedBytes)
			ephemeralIno += deref(v.InodesUsed)
		}
		out.VolumeStats = slices.Concat(out.VolumeStats, d.persistent[ps.ref.UID])
	}
	if info, err := statfs(p.cfg.RootDir); err == nil {
		out.EphemeralStorage = info.fsStats(s.t, ptr(ephemeral), ptr(ephemeralIno))
	}
	return out
}
