package nodestatus

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// machine is what the node reports about its hardware and OS. Upstream reads
// it once through cAdvisor at startup; so do we (only the root filesystem's
// size is read on every update).
type machine struct {
	numCPU        int
	memoryBytes   int64
	hugePages     map[int64]int64 // page size in bytes -> number of pages
	machineID     string
	systemUUID    string
	bootID        string
	kernelVersion string
	osImage       string
}

// hostPaths are the files the machine info comes from; tests point them
// elsewhere.
type hostPaths struct {
	meminfo   string
	hugepages string
	machineID []string // the first readable one wins, as in cAdvisor
	uuid      []string
	bootID    string
	osRelease string
}

var defaultHostPaths = hostPaths{
	meminfo:   "/proc/meminfo",
	hugepages: "/sys/kernel/mm/hugepages",
	machineID: []string{"/etc/machine-id", "/var/lib/dbus/machine-id"},
	// product_uuid is root-only and absent on some VMs; the device-tree
	// files are where non-x86 machines keep it (cAdvisor reads them too).
	uuid:      []string{"/sys/class/dmi/id/product_uuid", "/proc/device-tree/system-id", "/proc/device-tree/vm,uuid"},
	bootID:    "/proc/sys/kernel/random/boot_id",
	osRelease: "/etc/os-release",
}

// readMachine reads the machine info. Only memory is required: a node
// without memory capacity cannot admit anything.
func readMachine(p hostPaths) (*machine, error) {
	mem, err := readMemTotal(p.meminfo)
	if err != nil {
		return nil, err
	}
	m := &machine{
		numCPU:        runtime.NumCPU(),
		memoryBytes:   mem,
		hugePages:     readHugePages(p.hugepages),
		machineID:     firstFile(p.machineID),
		systemUUID:    firstFile(p.uuid),
		bootID:        firstFile([]string{p.bootID}),
		kernelVersion: kernelRelease(),
		osImage:       prettyName(p.osRelease),
	}
	return m, nil
}

// readMemTotal returns MemTotal from /proc/meminfo in bytes.
func readMemTotal(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("read memory capacity: %w", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 2 || fields[0] != "MemTotal:" {
			continue
		}
		kb, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse MemTotal in %s: %w", path, err)
		}
		return kb * 1024, nil
	}
	if err := s.Err(); err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	return 0, fmt.Errorf("no MemTotal in %s", path)
}

// readHugePages lists the page sizes the kernel supports (directories like
// hugepages-2048kB) with their number of pages. Sizes with zero pages are
// kept: upstream reports them as capacity 0.
func readHugePages(dir string) map[int64]int64 {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	pages := map[int64]int64{}
	for _, e := range entries {
		size, ok := strings.CutPrefix(e.Name(), "hugepages-")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(size, "kB"), 10, 64)
		if err != nil || kb <= 0 {
			continue
		}
		n, err := readInt(filepath.Join(dir, e.Name(), "nr_hugepages"))
		if err != nil {
			continue
		}
		pages[kb*1024] = n
	}
	return pages
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// firstFile returns the trimmed content of the first readable, non-empty
// file, or "".
func firstFile(paths []string) string {
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// device-tree strings end in NUL.
		if s := strings.TrimSpace(string(bytes.TrimRight(b, "\x00"))); s != "" {
			return s
		}
	}
	return ""
}

// prettyName is PRETTY_NAME from os-release, "Linux" when there is none (as
// cAdvisor does).
func prettyName(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "Linux"
	}
	for _, line := range strings.Split(string(b), "\n") {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "PRETTY_NAME=")
		if !ok {
			continue
		}
		if u, err := strconv.Unquote(v); err == nil {
			v = u
		} else {
			v = strings.Trim(v, `"'`)
		}
		if v != "" {
			return v
		}
	}
	return "Linux"
}

// kernelRelease is `uname -r`.
func kernelRelease() string {
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		return ""
	}
	var b strings.Builder
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	return b.String()
}

// filesystemBytes is the size of the filesystem holding path.
func filesystemBytes(path string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	// cAdvisor multiplies by the fragment size, which is the unit of f_blocks.
	unit := st.Frsize
	if unit == 0 {
		unit = st.Bsize
	}
	return int64(st.Blocks) * unit, nil
}

// hugePageResource is the resource name of a page size, e.g. hugepages-2Mi.
func hugePageResource(pageBytes int64) v1.ResourceName {
	return v1.ResourceName(v1.ResourceHugePagesPrefix + resource.NewQuantity(pageBytes, resource.BinarySI).String())
}
