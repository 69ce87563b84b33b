package config

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// Host is what the start-up checks read of the machine; HostPaths reads
// the real one.
type Host struct {
	Swaps      string // /proc/swaps
	ProcSys    string // /proc/sys
	CgroupRoot string // /sys/fs/cgroup
}

// HostPaths is the machine Skiff runs on.
var HostPaths = Host{Swaps: "/proc/swaps", ProcSys: "/proc/sys", CgroupRoot: "/sys/fs/cgroup"}

// KernelDefaults are the kernel settings the kubelet needs, which
// protectKernelDefaults insists on (upstream's setupKernelTunables).
var KernelDefaults = map[string]int{
	"vm/overcommit_memory":      1,
	"vm/panic_on_oom":           0,
	"kernel/panic":              10,
	"kernel/panic_on_oops":      1,
	"kernel/keys/root_maxkeys":  1000000,
	"kernel/keys/root_maxbytes": 25000000,
}

// CheckHost makes the start-up checks upstream makes against the machine,
// refusing with upstream's reasons: failCgroupV1 on cgroup v1,
// singleProcessOOMKill false on cgroup v1, failSwapOn with swap on, and
// protectKernelDefaults with kernel settings that differ.
func CheckHost(c *kubeletconfigv1beta1.KubeletConfiguration, h Host) error {
	var errs []error
	v1, err := cgroupV1(h.CgroupRoot)
	if err != nil {
		errs = append(errs, err)
	}
	if v1 && c.FailCgroupV1 != nil && *c.FailCgroupV1 {
		errs = append(errs, errors.New("kubelet is configured to not run on a host using cgroup v1. cgroup v1 support is in maintenance mode"))
	}
	if v1 && c.SingleProcessOOMKill != nil && !*c.SingleProcessOOMKill {
		errs = append(errs, errors.New("invalid configuration: singleProcessOOMKill must not be explicitly set to false when using cgroup v1"))
	}
	if c.FailSwapOn == nil || *c.FailSwapOn {
		on, err := swapOn(h.Swaps)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("failed to determine if swap is on: %w", err))
		case on:
			errs = append(errs, errors.New("running with swap on is not supported, please disable swap or set --fail-swap-on flag to false"))
		}
	}
	if c.ProtectKernelDefaults {
		errs = append(errs, checkKernelDefaults(h.ProcSys)...)
	}
	return errors.Join(errs...)
}

// cgroupV1 reports whether the cgroup root is not the unified (v2) hierarchy.
func cgroupV1(root string) (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		return false, fmt.Errorf("cgroup root %s: %w", root, err)
	}
	return st.Type != unix.CGROUP2_SUPER_MAGIC, nil
}

// swapOn reads /proc/swaps: a header line, then one line per active swap
// area.
func swapOn(path string) (bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil // no swap support in the kernel
		}
		return false, err
	}
	lines := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) != "" {
			lines++
		}
	}
	return lines > 1, sc.Err()
}

func checkKernelDefaults(procSys string) []error {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(KernelDefaults)) {
		want := KernelDefaults[k]
		data, err := os.ReadFile(filepath.Join(procSys, k))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		got, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			errs = append(errs, fmt.Errorf("kernel flag %s: %w", k, err))
			continue
		}
		if got != want {
			errs = append(errs, fmt.Errorf("invalid kernel flag: %s, expected value: %d, actual value: %d", k, want, got))
		}
	}
	return errs
}
