package stats

import (
	"context"
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ctrInfo is what a container's verbose status tells once and for all.
type ctrInfo struct {
	pid        int
	cgroupPath string // under the hierarchy: "/kubepods/pod1/abc"
	image      string
}

// verboseInfo is the part of containerd's verbose status "info" JSON
// (sandboxes and containers alike) that stats reads.
type verboseInfo struct {
	Pid         int    `json:"pid"`
	Image       string `json:"image"`
	RuntimeSpec struct {
		Linux struct {
			CgroupsPath string `json:"cgroupsPath"`
		} `json:"linux"`
	} `json:"runtimeSpec"`
}

func (p *Provider) readContainerInfo(ctx context.Context, id string) ctrInfo {
	resp, err := p.cfg.Runtime.ContainerStatus(ctx, id, true)
	if err != nil {
		return ctrInfo{}
	}
	i := ctrInfo{image: resp.GetStatus().GetImage().GetImage()}
	var v verboseInfo
	if json.Unmarshal([]byte(resp.GetInfo()["info"]), &v) == nil && v.RuntimeSpec.Linux.CgroupsPath != "" {
		i.pid, i.cgroupPath = v.Pid, cgroupPath(v.RuntimeSpec.Linux.CgroupsPath)
	}
	return i
}

// cadvisorIdle is how long after the last /metrics/cadvisor scrape samples
// keep reading the cgroup figures it shows: they cost some 9000 file reads
// per sample on a node with 100 pods, which a node nobody scrapes should
// not pay.
const cadvisorIdle = 10 * time.Minute

// sampleCadvisor reads, for every pod of s, its pod cgroup, its sandbox
// and its containers as cAdvisor shows them. The CPU and memory totals
// are the ones the summary shows (the same sample); the rest is read from
// the cgroups now.
func (p *Provider) sampleCadvisor(ctx context.Context, s *snapshot) {
	seen := map[string]ctrInfo{}
	pods := make([]*podSample, 0, len(s.pods))
	for _, ps := range s.pods {
		pods = append(pods, ps)
	}
	sort.Slice(pods, func(i, j int) bool {
		a, b := pods[i].ref, pods[j].ref
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
	var out []*cadvisorEntity
	for _, ps := range pods {
		ns, name := ps.ref.Namespace, ps.ref.Name
		sb := p.sbInfo[ps.sandboxID]
		if sb.cgroupPath != "" {
			sbPath := cgroupPath(sb.cgroupPath)
			if pod := path.Dir(sbPath); isPodCgroup(pod) {
				if e := p.readEntity(baseLabels("", pod, "", "", ns, name), pod, 0, s); e != nil {
					e.start, e.t = ps.start, ps.t
					e.cg.cpuMem = *ps.cpuMem // the summary's pod totals
					out = append(out, e)
				}
			}
			if e := p.readEntity(baseLabels("", sbPath, sb.image, ps.sandboxID, ns, name), sbPath, sb.pid, s); e != nil {
				e.start = ps.start
				if sb.pid > 0 {
					e.net, _ = netDevCounters(filepath.Join(p.cfg.ProcRoot, strconv.Itoa(sb.pid), "net", "dev"))
				}
				out = append(out, e)
			}
		}
		sort.Slice(ps.containers, func(i, j int) bool { return ps.containers[i].name < ps.containers[j].name })
		for _, cs := range ps.containers {
			ci, ok := p.ctrInfo[cs.id]
			if !ok {
				ci = p.readContainerInfo(ctx, cs.id)
			}
			if ci.cgroupPath == "" {
				continue // asked again next time
			}
			seen[cs.id] = ci
			if e := p.readEntity(baseLabels(cs.name, ci.cgroupPath, ci.image, cs.id, ns, name), ci.cgroupPath, ci.pid, s); e != nil {
				e.start = cs.start
				fromCRI(e, cs)
				out = append(out, e)
			}
		}
	}
	p.ctrInfo = seen
	s.cadvisor, s.withCadvisor = out, true
}

// readEntity reads the cgroup at cg; nil if it cannot be read.
func (p *Provider) readEntity(labels, cg string, pid int, s *snapshot) *cadvisorEntity {
	st, err := p.host.cg.stats(cg, p.cfg.ProcRoot)
	if err != nil {
		return nil
	}
	e := &cadvisorEntity{labels: labels, t: s.t, cg: st}
	if pid > 0 {
		e.maxOpenFiles, e.hasRoot = maxOpenFiles(filepath.Join(p.cfg.ProcRoot, strconv.Itoa(pid), "limits"))
	}
	return e
}

// fromCRI puts the runtime's CPU and memory of a container, the ones the
// summary shows, in place of the cgroup's.
func fromCRI(e *cadvisorEntity, cs *containerSample) {
	if c := cs.cpu; c != nil && c.UsageCoreNanoSeconds != nil {
		e.cg.cpuNanos, e.t = *c.UsageCoreNanoSeconds, c.Time.Time
	}
	if m := cs.mem; m != nil {
		if m.UsageBytes != nil {
			e.cg.usage = *m.UsageBytes
		}
		if m.WorkingSetBytes != nil {
			e.cg.workingSet = *m.WorkingSetBytes
		}
		if m.RSSBytes != nil {
			e.cg.rss = *m.RSSBytes
		}
	}
}

// isPodCgroup tells a pod's cgroup by its name: pod<uid> with the cgroupfs
// driver, kubepods-<qos>-pod<uid>.slice with systemd's.
func isPodCgroup(dir string) bool {
	base := path.Base(dir)
	return strings.HasPrefix(base, "pod") || strings.HasSuffix(base, ".slice") && strings.Contains(base, "-pod")
}

// maxOpenFiles is the soft "Max open files" of a /proc/<pid>/limits file,
// -1 for unlimited.
func maxOpenFiles(file string) (int64, bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, "Max open files")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 3 {
			return 0, false
		}
		if f[0] == "unlimited" {
			return -1, true
		}
		v, err := strconv.ParseInt(f[0], 10, 64)
		return v, err == nil
	}
	return 0, false
}
