package stats

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// machineInfo is what the machine_* and cadvisor_version_info series show:
// read once, as cAdvisor reads its machine info at start.
type machineInfo struct {
	cores, physicalCores, sockets uint64
	memory, swap                  uint64
	machineID, systemUUID, bootID string
	kernel, osVersion             string
}

// readMachine reads the machine from /proc, /sys and /etc under their
// roots (proc is /proc, sys is /sys, etc is /etc).
func readMachine(proc, sys, etc string) machineInfo {
	var m machineInfo
	m.cores, m.physicalCores, m.sockets = cpuTopology(filepath.Join(proc, "cpuinfo"))
	if mi, err := readKeyValues(filepath.Join(proc, "meminfo")); err == nil {
		m.memory, m.swap = mi["MemTotal"], mi["SwapTotal"]
	}
	m.machineID = firstLine(filepath.Join(etc, "machine-id"), "/var/lib/dbus/machine-id")
	m.systemUUID = firstLine(filepath.Join(sys, "class", "dmi", "id", "product_uuid"))
	m.bootID = firstLine(filepath.Join(proc, "sys", "kernel", "random", "boot_id"))
	var u syscall.Utsname
	if syscall.Uname(&u) == nil {
		m.kernel = utsString(u.Release[:])
	}
	m.osVersion = "Linux"
	if b, err := os.ReadFile(filepath.Join(etc, "os-release")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
				m.osVersion = strings.Trim(v, `"`)
			}
		}
	}
	return m
}

// cpuTopology counts the logical CPUs, the distinct (package, core) pairs
// and the distinct packages of /proc/cpuinfo.
func cpuTopology(file string) (logical, physical, sockets uint64) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, 0, 0
	}
	cores, packages := map[string]bool{}, map[string]bool{}
	pkg := ""
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "processor":
			logical++
		case "physical id":
			pkg = v
			packages[v] = true
		case "core id":
			cores[pkg+"/"+v] = true
		}
	}
	physical, sockets = uint64(len(cores)), uint64(len(packages))
	// Some machines (arm64, some VMs) leave the topology out: count
	// every logical CPU a core of one socket then.
	if physical == 0 {
		physical = logical
	}
	if sockets == 0 && logical > 0 {
		sockets = 1
	}
	return logical, physical, sockets
}

// firstLine is the trimmed content of the first of files that reads.
func firstLine(files ...string) string {
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	return ""
}

func utsString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}
