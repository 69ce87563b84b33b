package stats

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/skiff-sh/skiff/internal/cri"
)

// podSample is one pod's CPU, memory and network in a snapshot.
type podSample struct {
	ref        cri.PodRef
	sandboxID  string
	start      time.Time // sandbox creation
	t          time.Time
	cpuMem     *cpuMem // totals; from cgroups, the sandbox's plus its containers
	rate       *uint64
	runtime    bool // the runtime's sandbox stats gave the totals
	whole      bool // the totals hold the containers: runtime or pod cgroup
	processes  *uint64
	net        []statsapi.InterfaceStats
	containers []*containerSample
}

type containerSample struct {
	id, name   string
	start      time.Time
	t          time.Time
	cpu        *statsapi.CPUStats
	mem        *statsapi.MemoryStats
	rootfsUsed *uint64
	rootfsIno  *uint64
	rootfsFs   string // mountpoint of the writable layer's filesystem
}

type fsSample struct {
	info       fsInfo
	used, ino  *uint64
	mountpoint string
}

// sandboxInfo is what a sandbox's verbose status tells once and for all.
type sandboxInfo struct {
	pid        int
	cgroupPath string
	image      string
}

// After ListPodSandboxStats fails, it is left alone for a while, doubling
// from sandboxStatsRetryMin to sandboxStatsRetryMax while it keeps failing:
// containerd 1.6 always fails it for sandboxes without a cgroup parent, but
// a sandbox removed during the call fails it once, and that should not cost
// minutes of runtime stats.
const (
	sandboxStatsRetryMin = 30 * time.Second
	sandboxStatsRetryMax = 10 * time.Minute
)

// Sample reads the node and every running pod once.
func (p *Provider) Sample(ctx context.Context) error {
	p.sampleMu.Lock()
	defer p.sampleMu.Unlock()
	now := p.now()
	next := map[string]cpuPoint{}
	s := &snapshot{t: now, bootTime: p.host.bootTime(), memCap: p.host.memoryCapacity(),
		defaultNIC: p.host.defaultRouteInterface(), pods: map[types.UID]*podSample{}}
	if s.node, s.nodeErr = p.host.nodeCPUMem(); s.nodeErr == nil {
		s.nodeRate = p.rate(next, "node", cpuPoint{now, s.node.cpuNanos})
	}
	s.imageFs, s.containerFs = p.runtimeFs(ctx)

	rt, err := p.listRuntime(ctx)
	if err != nil {
		return err
	}
	bySandbox := p.samplePods(ctx, s, rt.sandboxes, next)
	for _, c := range rt.containers {
		ps := bySandbox[c.PodSandboxId]
		if ps == nil {
			continue
		}
		cs := containerFrom(c, rt.stats[c.Id], now)
		if cs.cpu != nil && cs.cpu.UsageCoreNanoSeconds != nil {
			cs.cpu.UsageNanoCores = p.rate(next, "ctr/"+c.Id, cpuPoint{cs.cpu.Time.Time, *cs.cpu.UsageCoreNanoSeconds})
		}
		ps.containers = append(ps.containers, cs)
		if !ps.whole {
			addContainer(ps.cpuMem, cs)
		}
	}
	for _, ps := range s.pods {
		if !ps.runtime {
			ps.rate = p.rate(next, "pod/"+string(ps.ref.UID), cpuPoint{now, ps.cpuMem.cpuNanos})
		}
	}
	p.prev = next
	if p.now().Sub(time.Unix(0, p.cadvisorAsked.Load())) < cadvisorIdle {
		p.sampleCadvisor(ctx, s)
	}
	p.mu.Lock()
	p.snap = s
	p.mu.Unlock()
	return nil
}

// runtimeLists is what one sample lists from the runtime: the ready
// sandboxes, the running containers and the containers' stats by ID.
type runtimeLists struct {
	sandboxes  []*runtimeapi.PodSandbox
	containers []*runtimeapi.Container
	stats      map[string]*runtimeapi.ContainerStats
}

func (p *Provider) listRuntime(ctx context.Context) (runtimeLists, error) {
	var rt runtimeLists
	var err error
	rt.sandboxes, err = p.cfg.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
	if err != nil {
		return rt, fmt.Errorf("list sandboxes: %w", err)
	}
	rt.containers, err = p.cfg.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil {
		return rt, fmt.Errorf("list containers: %w", err)
	}
	cstats, err := p.cfg.Runtime.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{})
	if err != nil {
		return rt, fmt.Errorf("list container stats: %w", err)
	}
	rt.stats = make(map[string]*runtimeapi.ContainerStats, len(cstats))
	for _, c := range cstats {
		rt.stats[c.GetAttributes().GetId()] = c
	}
	return rt, nil
}

// samplePods adds a podSample per Skiff sandbox to s, with the pod's CPU,
// memory and network from the runtime's sandbox stats or else from its
// cgroups and netns, and returns them by sandbox ID.
func (p *Provider) samplePods(ctx context.Context, s *snapshot, sandboxes []*runtimeapi.PodSandbox, next map[string]cpuPoint) map[string]*podSample {
	sbStats := p.sandboxStats(ctx)
	seen := map[string]sandboxInfo{}
	bySandbox := map[string]*podSample{}
	for _, sb := range sandboxes {
		ref, ok := cri.PodRefFromLabels(sb.Labels)
		if !ok {
			continue
		}
		ps := &podSample{ref: ref, sandboxID: sb.Id, start: time.Unix(0, sb.CreatedAt), t: s.t}
		s.pods[ref.UID] = ps
		bySandbox[sb.Id] = ps
		// The sandbox's pid and cgroup (one verbose status call, then
		// cached) are only needed where the runtime's stats fall short.
		info := func() sandboxInfo {
			i, ok := p.sbInfo[sb.Id]
			if !ok {
				i = p.readSandboxInfo(ctx, sb.Id)
			}
			seen[sb.Id] = i
			return i
		}
		if st := sbStats[sb.Id]; st != nil && st.GetLinux().GetCpu() != nil {
			p.fromSandboxStats(ps, st.GetLinux(), next)
		} else {
			p.fromCgroups(ps, info())
		}
		// The pod's process count (pid.available ranks by it) is in the
		// pids controller of the pod cgroup, the sandbox's parent.
		if i := info(); i.cgroupPath != "" {
			ps.processes = p.host.cg.pids(path.Dir(cgroupPath(i.cgroupPath)))
		}
		// containerd 1.6 leaves a sandbox's network out of its stats when
		// it cannot read the netns; the sandbox's /proc/<pid>/net/dev has it.
		if ps.net == nil {
			if i := info(); i.pid > 0 {
				ps.net, _ = netDev(filepath.Join(p.cfg.ProcRoot, strconv.Itoa(i.pid), "net", "dev"))
			}
		}
	}
	p.sbInfo = seen
	return bySandbox
}

func (p *Provider) sandboxStats(ctx context.Context) map[string]*runtimeapi.PodSandboxStats {
	if p.now().Before(p.sbStatsOff) {
		return nil
	}
	list, err := p.cfg.Runtime.ListPodSandboxStats(ctx, &runtimeapi.PodSandboxStatsFilter{})
	if err != nil {
		p.sbStatsRetry = min(max(2*p.sbStatsRetry, sandboxStatsRetryMin), sandboxStatsRetryMax)
		klog.V(2).InfoS("Runtime gives no pod sandbox stats; reading pod cgroups instead", "err", err, "retryIn", p.sbStatsRetry)
		p.sbStatsOff = p.now().Add(p.sbStatsRetry)
		return nil
	}
	p.sbStatsRetry = 0
	out := make(map[string]*runtimeapi.PodSandboxStats, len(list))
	for _, s := range list {
		out[s.GetAttributes().GetId()] = s
	}
	return out
}

// fromSandboxStats takes a pod's CPU, memory and network from the runtime.
func (p *Provider) fromSandboxStats(ps *podSample, l *runtimeapi.LinuxPodSandboxStats, next map[string]cpuPoint) {
	cm := &cpuMem{cpuNanos: l.GetCpu().GetUsageCoreNanoSeconds().GetValue()}
	if m := l.GetMemory(); m != nil {
		cm.usage, cm.workingSet, cm.rss = m.GetUsageBytes().GetValue(), m.GetWorkingSetBytes().GetValue(), m.GetRssBytes().GetValue()
		cm.pageFaults, cm.majorPageFaults = m.GetPageFaults().GetValue(), m.GetMajorPageFaults().GetValue()
	}
	ps.t = time.Unix(0, l.GetCpu().GetTimestamp())
	ps.cpuMem, ps.runtime, ps.whole = cm, true, true
	ps.rate = p.rate(next, "pod/"+string(ps.ref.UID), cpuPoint{ps.t, cm.cpuNanos})
	for _, i := range l.GetNetwork().GetInterfaces() {
		ps.net = append(ps.net, statsapi.InterfaceStats{Name: i.Name,
			RxBytes: ptr(i.GetRxBytes().GetValue()), RxErrors: ptr(i.GetRxErrors().GetValue()),
			TxBytes: ptr(i.GetTxBytes().GetValue()), TxErrors: ptr(i.GetTxErrors().GetValue())})
	}
	if len(ps.net) == 0 {
		ps.net = nil
	}
}

// fromCgroups reads a pod's totals from its pod cgroup, the sandbox's
// parent, as upstream does. Without one (no cgroupsPerQOS) they start with
// the sandbox (pause) cgroup and the containers are added as they are read.
func (p *Provider) fromCgroups(ps *podSample, info sandboxInfo) {
	ps.cpuMem = &cpuMem{}
	if info.cgroupPath == "" {
		return
	}
	sb := cgroupPath(info.cgroupPath)
	if pod := path.Dir(sb); isPodCgroup(pod) {
		if m, err := p.host.cg.read(pod); err == nil {
			*ps.cpuMem, ps.whole = m, true
			return
		}
	}
	if m, err := p.host.cg.read(sb); err == nil {
		*ps.cpuMem = m
	}
}

func (p *Provider) readSandboxInfo(ctx context.Context, id string) sandboxInfo {
	resp, err := p.cfg.Runtime.PodSandboxStatus(ctx, id, true)
	if err != nil {
		return sandboxInfo{}
	}
	var v verboseInfo
	if err := json.Unmarshal([]byte(resp.GetInfo()["info"]), &v); err != nil {
		return sandboxInfo{}
	}
	return sandboxInfo{pid: v.Pid, cgroupPath: v.RuntimeSpec.Linux.CgroupsPath, image: v.Image}
}

// runtimeFs is the runtime's image filesystem and the one its containers
// write to: the same unless ImageFsInfo reports container filesystems of
// their own (a split image filesystem, CRI 1.29 and later).
func (p *Provider) runtimeFs(ctx context.Context) (image, containers *fsSample) {
	resp, err := p.cfg.Images.ImageFsInfo(ctx)
	if err != nil || len(resp.GetImageFilesystems()) == 0 {
		return nil, nil
	}
	image = fsSampleOf(resp.GetImageFilesystems()[0])
	containers = image
	if c := resp.GetContainerFilesystems(); len(c) > 0 && c[0].GetFsId().GetMountpoint() != image.mountpoint {
		containers = fsSampleOf(c[0])
	}
	return image, containers
}

func fsSampleOf(u *runtimeapi.FilesystemUsage) *fsSample {
	fs := &fsSample{mountpoint: u.GetFsId().GetMountpoint()}
	fs.info, _ = statfs(fs.mountpoint)
	if u.UsedBytes != nil {
		fs.used = ptr(u.UsedBytes.Value)
	}
	if u.InodesUsed != nil {
		fs.ino = ptr(u.InodesUsed.Value)
	}
	return fs
}

func containerFrom(c *runtimeapi.Container, st *runtimeapi.ContainerStats, now time.Time) *containerSample {
	cs := &containerSample{id: c.Id, name: c.GetMetadata().GetName(), start: time.Unix(0, c.CreatedAt), t: now}
	if st == nil {
		return cs
	}
	if cpu := st.GetCpu(); cpu != nil {
		cs.cpu = &statsapi.CPUStats{Time: metaTime(time.Unix(0, cpu.Timestamp))}
		if cpu.UsageCoreNanoSeconds != nil {
			cs.cpu.UsageCoreNanoSeconds = ptr(cpu.UsageCoreNanoSeconds.Value)
		}
	}
	if m := st.GetMemory(); m != nil {
		cs.mem = &statsapi.MemoryStats{Time: metaTime(time.Unix(0, m.Timestamp)),
			UsageBytes: value(m.UsageBytes), WorkingSetBytes: value(m.WorkingSetBytes), RSSBytes: value(m.RssBytes),
			PageFaults: value(m.PageFaults), MajorPageFaults: value(m.MajorPageFaults), AvailableBytes: value(m.AvailableBytes)}
	}
	if w := st.GetWritableLayer(); w != nil {
		cs.rootfsUsed, cs.rootfsIno = value(w.UsedBytes), value(w.InodesUsed)
		cs.rootfsFs = w.GetFsId().GetMountpoint()
	}
	return cs
}

func value(v *runtimeapi.UInt64Value) *uint64 {
	if v == nil {
		return nil
	}
	return ptr(v.Value)
}

// addContainer adds a container's CPU and memory to its pod's totals.
func addContainer(total *cpuMem, cs *containerSample) {
	if cs.cpu != nil && cs.cpu.UsageCoreNanoSeconds != nil {
		total.cpuNanos += *cs.cpu.UsageCoreNanoSeconds
	}
	if m := cs.mem; m != nil {
		total.usage += deref(m.UsageBytes)
		total.workingSet += deref(m.WorkingSetBytes)
		total.rss += deref(m.RSSBytes)
		total.pageFaults += deref(m.PageFaults)
		total.majorPageFaults += deref(m.MajorPageFaults)
	}
}

func deref(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}
