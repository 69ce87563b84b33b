package stats

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cgStats is everything cAdvisor shows of one cgroup beyond the CPU and
// memory totals of cpuMem, read the way cAdvisor's libcontainer handler
// reads it, on v1 and v2. Absent files leave their fields at zero, as
// cAdvisor shows them.
type cgStats struct {
	cpuMem
	cpuUser, cpuSystem uint64 // nanoseconds
	// CFS throttling: periods, throttled periods, throttled nanoseconds.
	periods, throttled, throttledNanos uint64
	// Spec: cpu.shares (v2: from cpu.weight), CFS quota (0: none) and
	// period in microseconds; memory limit, swap limit, reservation.
	shares, quota, period            uint64
	memLimit, swapLimit, reservation uint64

	maxUsage, failcnt, kernel uint64
	cache, swap, mappedFile   uint64
	activeFile, inactiveFile  uint64
	pgfault, pgmajfault       uint64 // the cgroup's own, as cAdvisor shows them
	oomKills                  uint64
	threads, threadsMax       uint64 // pids.current, pids.max (0: max)
	// Processes of the cgroup itself (cgroup.procs), their open files and
	// the sockets among them.
	procs, fds, sockets uint64
	// Pressure stall totals in microseconds: cpu, memory, io; some, full.
	psi  [3][2]uint64
	disk []diskIO
}

// diskIO is one block device's I/O from blkio (v1) or io.stat (v2): bytes
// and operations by kind ("Read", "Write", and on v1 "Sync", "Async",
// "Discard", "Total"), as cAdvisor names them.
type diskIO struct {
	major, minor uint64
	bytes, ios   map[string]uint64
}

// stats reads the cgroup at path ("/kubepods/pod1/abc"); an error only
// when its CPU and memory cannot be read at all.
func (c cgroups) stats(path, proc string) (cgStats, error) {
	var s cgStats
	var err error
	if c.v2 {
		err = c.statsV2(path, &s)
	} else {
		err = c.statsV1(path, &s)
	}
	if err != nil {
		return s, err
	}
	procsDir := filepath.Join(c.root, "cpu", path)
	if c.v2 {
		procsDir = filepath.Join(c.root, path)
	}
	s.procs, s.fds, s.sockets = countProcs(filepath.Join(procsDir, "cgroup.procs"), proc)
	return s, nil
}

func (c cgroups) statsV1(path string, s *cgStats) error {
	var err error
	var memStat map[string]uint64
	if s.cpuMem, memStat, err = c.readV1Stat(path); err != nil {
		return err
	}
	cpu, acct, mem := filepath.Join(c.root, "cpu", path), filepath.Join(c.root, "cpuacct", path), filepath.Join(c.root, "memory", path)
	// cpuacct.stat counts user and system time in clock ticks.
	if st, err := readKeyValues(filepath.Join(acct, "cpuacct.stat")); err == nil {
		s.cpuUser, s.cpuSystem = st["user"]*1e9/userHZ, st["system"]*1e9/userHZ
	}
	if st, err := readKeyValues(filepath.Join(cpu, "cpu.stat")); err == nil {
		s.periods, s.throttled, s.throttledNanos = st["nr_periods"], st["nr_throttled"], st["throttled_time"]
	}
	s.shares = readOr0(filepath.Join(cpu, "cpu.shares"))
	s.period = readOr0(filepath.Join(cpu, "cpu.cfs_period_us"))
	s.quota = readOr0(filepath.Join(cpu, "cpu.cfs_quota_us")) // -1 fails to parse: none
	s.memLimit = readOr0(filepath.Join(mem, "memory.limit_in_bytes"))
	s.swapLimit = readOr0(filepath.Join(mem, "memory.memsw.limit_in_bytes"))
	s.reservation = readOr0(filepath.Join(mem, "memory.soft_limit_in_bytes"))
	s.maxUsage = readOr0(filepath.Join(mem, "memory.max_usage_in_bytes"))
	s.failcnt = readOr0(filepath.Join(mem, "memory.failcnt"))
	s.kernel = readOr0(filepath.Join(mem, "memory.kmem.usage_in_bytes"))
	st := memStat
	s.cache, s.swap, s.mappedFile = st["total_cache"], st["total_swap"], st["total_mapped_file"]
	s.activeFile, s.inactiveFile = st["total_active_file"], st["total_inactive_file"]
	s.pgfault, s.pgmajfault = st["pgfault"], st["pgmajfault"]
	if st, err := readKeyValues(filepath.Join(mem, "memory.oom_control")); err == nil {
		s.oomKills = st["oom_kill"]
	}
	pids := filepath.Join(c.root, "pids", path)
	s.threads, s.threadsMax = readOr0(filepath.Join(pids, "pids.current")), readOr0(filepath.Join(pids, "pids.max"))
	s.disk = blkioV1(filepath.Join(c.root, "blkio", path))
	return nil
}

func (c cgroups) statsV2(path string, s *cgStats) error {
	var err error
	var cpu, st map[string]uint64
	if s.cpuMem, cpu, st, err = c.readV2Stat(path); err != nil {
		return err
	}
	dir := filepath.Join(c.root, path)
	s.cpuUser, s.cpuSystem = cpu["user_usec"]*1000, cpu["system_usec"]*1000
	s.periods, s.throttled, s.throttledNanos = cpu["nr_periods"], cpu["nr_throttled"], cpu["throttled_usec"]*1000
	if w := readOr0(filepath.Join(dir, "cpu.weight")); w > 0 {
		s.shares = 2 + (w-1)*262142/9999 // cpu.weight back to shares, as cAdvisor
	}
	if b, err := os.ReadFile(filepath.Join(dir, "cpu.max")); err == nil {
		if q, p, ok := strings.Cut(strings.TrimSpace(string(b)), " "); ok {
			s.quota, _ = strconv.ParseUint(q, 10, 64) // "max": none
			s.period, _ = strconv.ParseUint(p, 10, 64)
		}
	}
	s.memLimit = readOr0(filepath.Join(dir, "memory.max"))
	s.swapLimit = readOr0(filepath.Join(dir, "memory.swap.max"))
	s.reservation = readOr0(filepath.Join(dir, "memory.min"))
	s.maxUsage = readOr0(filepath.Join(dir, "memory.peak"))
	s.swap = readOr0(filepath.Join(dir, "memory.swap.current"))
	s.cache, s.mappedFile = st["file"], st["file_mapped"]
	s.activeFile, s.inactiveFile = st["active_file"], st["inactive_file"]
	s.pgfault, s.pgmajfault = st["pgfault"], st["pgmajfault"]
	if st, err := readKeyValues(filepath.Join(dir, "memory.events")); err == nil {
		s.oomKills = st["oom_kill"]
	}
	s.threads, s.threadsMax = readOr0(filepath.Join(dir, "pids.current")), readOr0(filepath.Join(dir, "pids.max"))
	for i, res := range []string{"cpu", "memory", "io"} {
		s.psi[i] = readPressure(filepath.Join(dir, res+".pressure"))
	}
	s.disk = ioStatV2(filepath.Join(dir, "io.stat"))
	return nil
}

// readOr0 is a file's number, 0 when it is absent or not a number ("max").
func readOr0(path string) uint64 {
	v, _ := readUint(path)
	return v
}

// readPressure reads the some and full "total=" microseconds of a PSI file.
func readPressure(path string) [2]uint64 {
	var out [2]uint64
	b, err := os.ReadFile(path)
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		i := 0
		if f[0] == "full" {
			i = 1
		}
		for _, kv := range f[1:] {
			if v, ok := strings.CutPrefix(kv, "total="); ok {
				out[i], _ = strconv.ParseUint(v, 10, 64)
			}
		}
	}
	return out
}

// countProcs counts the processes in a cgroup.procs file, their open file
// descriptors and the sockets among those, as cAdvisor's process metrics.
func countProcs(procsFile, proc string) (procs, fds, sockets uint64) {
	b, err := os.ReadFile(procsFile)
	if err != nil {
		return 0, 0, 0
	}
	for _, pid := range strings.Fields(string(b)) {
		procs++
		dir := filepath.Join(proc, pid, "fd")
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		fds += uint64(len(entries))
		for _, e := range entries {
			// Readlink reads the link itself and never follows it.
			if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.HasPrefix(l, "socket:") {
				sockets++
			}
		}
	}
	return procs, fds, sockets
}
