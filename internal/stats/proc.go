package stats

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// host reads the node's own figures from the cgroup root and /proc.
type host struct {
	cg   cgroups
	proc string // /proc
}

// nodeCPUMem reads the node's CPU and memory: the root cgroup on v1, as
// upstream does; on v2, whose root has no memory files, /proc.
func (h host) nodeCPUMem() (cpuMem, error) {
	if !h.cg.v2 {
		if m, err := h.cg.read("/"); err == nil {
			return m, nil
		}
	}
	var out cpuMem
	st, err := readKeyValues(filepath.Join(h.cg.root, "cpu.stat"))
	if u, ok := st["usage_usec"]; err == nil && ok {
		out.cpuNanos = u * 1000
	} else if out.cpuNanos, err = h.procStatCPU(); err != nil {
		return out, err
	}
	mi, err := readKeyValues(filepath.Join(h.proc, "meminfo"))
	if err != nil {
		return out, err
	}
	out.usage = sub(mi["MemTotal"], mi["MemFree"])
	out.workingSet = sub(out.usage, mi["Inactive(file)"])
	out.rss = mi["AnonPages"]
	if vm, err := readKeyValues(filepath.Join(h.proc, "vmstat")); err == nil {
		out.pageFaults, out.majorPageFaults = vm["pgfault"], vm["pgmajfault"]
	}
	return out, nil
}

// userHZ is the unit of /proc/stat's CPU times on Linux.
const userHZ = 100

// procStatCPU sums the busy CPU time of the "cpu" line of /proc/stat.
func (h host) procStatCPU() (uint64, error) {
	b, err := os.ReadFile(filepath.Join(h.proc, "stat"))
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var ticks uint64
	// user nice system idle iowait irq softirq steal: all but idle and iowait.
	for i, v := range f[1:] {
		if i == 3 || i == 4 || i > 7 {
			continue
		}
		n, _ := strconv.ParseUint(v, 10, 64)
		ticks += n
	}
	return ticks * uint64(time.Second) / userHZ, nil
}

func (h host) memoryCapacity() uint64 {
	mi, err := readKeyValues(filepath.Join(h.proc, "meminfo"))
	if err != nil {
		return 0
	}
	return mi["MemTotal"]
}

// bootTime is when the node started, from /proc/stat's btime.
func (h host) bootTime() time.Time {
	st, err := readKeyValues(filepath.Join(h.proc, "stat"))
	if err != nil || st["btime"] == 0 {
		return time.Time{}
	}
	return time.Unix(int64(st["btime"]), 0)
}

// netCounters is one interface's line of /proc/<pid>/net/dev.
type netCounters struct {
	name                                  string
	rxBytes, rxPackets, rxErrors, rxDrops uint64
	txBytes, txPackets, txErrors, txDrops uint64
}

// netDevCounters parses a /proc/<pid>/net/dev file, leaving out loopback
// and the host ends of pod veths (they count pod traffic twice).
func netDevCounters(path string) ([]netCounters, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []netCounters
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		name = strings.TrimSpace(name)
		if !ok || name == "lo" || strings.HasPrefix(name, "veth") {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 16 {
			continue
		}
		n := func(i int) uint64 { v, _ := strconv.ParseUint(f[i], 10, 64); return v }
		// receive: bytes packets errs drop ...; transmit from field 8 on.
		out = append(out, netCounters{name: name,
			rxBytes: n(0), rxPackets: n(1), rxErrors: n(2), rxDrops: n(3),
			txBytes: n(8), txPackets: n(9), txErrors: n(10), txDrops: n(11)})
	}
	return out, sc.Err()
}

// netDev is netDevCounters as the summary API's InterfaceStats.
func netDev(path string) ([]statsapi.InterfaceStats, error) {
	c, err := netDevCounters(path)
	if err != nil {
		return nil, err
	}
	var out []statsapi.InterfaceStats
	for _, i := range c {
		out = append(out, statsapi.InterfaceStats{Name: i.name,
			RxBytes: ptr(i.rxBytes), RxErrors: ptr(i.rxErrors), TxBytes: ptr(i.txBytes), TxErrors: ptr(i.txErrors)})
	}
	return out, nil
}

// network builds NetworkStats from interfaces, the main one being def
// (or eth0, or the first) as upstream shows one interface at the top.
func network(t time.Time, ifaces []statsapi.InterfaceStats, def string) *statsapi.NetworkStats {
	if len(ifaces) == 0 {
		return nil
	}
	out := &statsapi.NetworkStats{Time: metaTime(t), Interfaces: ifaces, InterfaceStats: ifaces[0]}
	for _, want := range []string{def, "eth0"} {
		for _, i := range ifaces {
			if want != "" && i.Name == want {
				out.InterfaceStats = i
				return out
			}
		}
	}
	return out
}

// defaultRouteInterface names the interface of the default IPv4 route.
func (h host) defaultRouteInterface() string {
	b, err := os.ReadFile(filepath.Join(h.proc, "net", "route"))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 2 && f[1] == "00000000" {
			return f[0]
		}
	}
	return ""
}

// rlimit reads the PID limit and the number of processes (threads, as the
// kernel's sysinfo counts them, which is what upstream reports).
func (h host) rlimit(t time.Time) *statsapi.RlimitStats {
	out := &statsapi.RlimitStats{Time: metaTime(t)}
	if v, err := readUint(filepath.Join(h.proc, "sys", "kernel", "pid_max")); err == nil {
		max := int64(v)
		out.MaxPID = &max
	}
	if n, err := h.processCount(); err == nil {
		out.NumOfRunningProcesses = &n
	}
	return out
}

// processCount counts the threads in /proc/loadavg's "running/total" field.
func (h host) processCount() (int64, error) {
	b, err := os.ReadFile(filepath.Join(h.proc, "loadavg"))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) < 4 {
		return 0, os.ErrInvalid
	}
	_, total, _ := strings.Cut(f[3], "/")
	return strconv.ParseInt(total, 10, 64)
}
