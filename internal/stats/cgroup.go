package stats

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cpuMem is one reading of a cgroup's (or the node's) CPU and memory.
type cpuMem struct {
	cpuNanos        uint64 // cumulative CPU time, all cores
	usage           uint64 // memory usage, page cache included
	workingSet      uint64 // usage minus inactive file pages, as upstream
	rss             uint64
	pageFaults      uint64
	majorPageFaults uint64
}

// cgroups reads cgroup files under root (/sys/fs/cgroup), v1 or v2.
type cgroups struct {
	root string
	v2   bool
}

// detectCgroups tells a unified (v2) hierarchy by its cgroup.controllers
// file at the root; anything else is read as v1 (hybrid hosts keep their
// controllers on v1).
func detectCgroups(root string) cgroups {
	_, err := os.Stat(filepath.Join(root, "cgroup.controllers"))
	return cgroups{root: root, v2: err == nil}
}

// read returns the CPU and memory of the cgroup at path ("/" for the root).
func (c cgroups) read(path string) (cpuMem, error) {
	if c.v2 {
		return c.readV2(path)
	}
	return c.readV1(path)
}

func (c cgroups) readV1(path string) (cpuMem, error) {
	out, _, err := c.readV1Stat(path)
	return out, err
}

// readV1Stat is readV1 with the memory.stat it read.
func (c cgroups) readV1Stat(path string) (cpuMem, map[string]uint64, error) {
	var out cpuMem
	var err error
	if out.cpuNanos, err = readUint(filepath.Join(c.root, "cpuacct", path, "cpuacct.usage")); err != nil {
		return out, nil, err
	}
	mem := filepath.Join(c.root, "memory", path)
	if out.usage, err = readUint(filepath.Join(mem, "memory.usage_in_bytes")); err != nil {
		return out, nil, err
	}
	st, err := readKeyValues(filepath.Join(mem, "memory.stat"))
	if err != nil {
		return out, nil, err
	}
	// total_* are hierarchical: they include the children, like usage.
	out.workingSet = sub(out.usage, st["total_inactive_file"])
	out.rss = st["total_rss"]
	out.pageFaults, out.majorPageFaults = st["total_pgfault"], st["total_pgmajfault"]
	return out, st, nil
}

func (c cgroups) readV2(path string) (cpuMem, error) {
	out, _, _, err := c.readV2Stat(path)
	return out, err
}

// readV2Stat is readV2 with the cpu.stat and memory.stat it read.
func (c cgroups) readV2Stat(path string) (out cpuMem, cpu, st map[string]uint64, err error) {
	dir := filepath.Join(c.root, path)
	if cpu, err = readKeyValues(filepath.Join(dir, "cpu.stat")); err != nil {
		return out, nil, nil, err
	}
	out.cpuNanos = cpu["usage_usec"] * 1000
	if out.usage, err = readUint(filepath.Join(dir, "memory.current")); err != nil {
		return out, nil, nil, err
	}
	if st, err = readKeyValues(filepath.Join(dir, "memory.stat")); err != nil {
		return out, nil, nil, err
	}
	out.workingSet = sub(out.usage, st["inactive_file"])
	out.rss = st["anon"]
	out.pageFaults, out.majorPageFaults = st["pgfault"], st["pgmajfault"]
	return out, cpu, st, nil
}

// cgroupPath turns an OCI spec's linux.cgroupsPath into a path under the
// hierarchy: "/k8s.io/<id>" as is, and the systemd driver's
// "slice:prefix:name" as systemd lays it out.
func cgroupPath(p string) string {
	parts := strings.Split(p, ":")
	if len(parts) != 3 || strings.HasPrefix(p, "/") {
		return p
	}
	slice, prefix, name := parts[0], parts[1], parts[2]
	dir := "/"
	if slice != "" && slice != "-.slice" {
		// a-b-c.slice lives in a.slice/a-b.slice/a-b-c.slice
		stem := strings.TrimSuffix(slice, ".slice")
		segs := strings.Split(stem, "-")
		for i := range segs {
			dir = filepath.Join(dir, strings.Join(segs[:i+1], "-")+".slice")
		}
	}
	unit := name
	if prefix != "" {
		unit = prefix + "-" + name
	}
	if !strings.HasSuffix(unit, ".slice") {
		unit += ".scope"
	}
	return filepath.Join(dir, unit)
}

func sub(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}

func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", path, err)
	}
	return v, nil
}

// readKeyValues reads "key value" lines (memory.stat, cpu.stat,
// /proc/meminfo with its "kB" units and colons, /proc/vmstat).
func readKeyValues(path string) (map[string]uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	// Line by line without a bufio.Scanner, whose 4 KiB buffer per file
	// was most of what a sample allocated.
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		f := strings.Fields(string(line))
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			continue
		}
		if len(f) > 2 && f[2] == "kB" {
			v *= 1024
		}
		out[strings.TrimSuffix(f[0], ":")] = v
	}
	return out, nil
}
