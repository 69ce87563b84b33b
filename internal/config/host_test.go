package config

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

// fakeHost is a machine made of files in the kernel's formats: /proc/swaps
// with the given areas, /proc/sys with the given settings, and the real
// cgroup root.
func fakeHost(t *testing.T, swaps []string, sysctls map[string]int) Host {
	t.Helper()
	dir := t.TempDir()
	content := "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n" + strings.Join(swaps, "\n")
	if err := os.WriteFile(filepath.Join(dir, "swaps"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	for k, v := range sysctls {
		path := filepath.Join(dir, "sys", k)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(strconv.Itoa(v)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return Host{Swaps: filepath.Join(dir, "swaps"), ProcSys: filepath.Join(dir, "sys"), CgroupRoot: "/sys/fs/cgroup"}
}

func hostConfig(mod func(c *kubeletconfigv1beta1.KubeletConfiguration)) *kubeletconfigv1beta1.KubeletConfiguration {
	c := &kubeletconfigv1beta1.KubeletConfiguration{}
	mod(c)
	SetDefaults(c)
	return c
}

func TestCheckHostSwap(t *testing.T) {
	area := "/swapfile                               file\t\t1048572\t\t0\t\t-2"
	on := fakeHost(t, []string{area}, nil)
	off := fakeHost(t, nil, nil)
	failSwap := hostConfig(func(*kubeletconfigv1beta1.KubeletConfiguration) {}) // failSwapOn defaults to true
	allowSwap := hostConfig(func(c *kubeletconfigv1beta1.KubeletConfiguration) { c.FailSwapOn = ptr.To(false) })

	if err := CheckHost(failSwap, on); err == nil || !strings.Contains(err.Error(), "running with swap on is not supported") {
		t.Errorf("swap on, failSwapOn: %v", err)
	}
	if err := CheckHost(allowSwap, on); err != nil {
		t.Errorf("swap on, failSwapOn false: %v", err)
	}
	if err := CheckHost(failSwap, off); err != nil {
		t.Errorf("swap off: %v", err)
	}
}

func TestCheckHostKernelDefaults(t *testing.T) {
	good := map[string]int{}
	for k, v := range KernelDefaults {
		good[k] = v
	}
	protect := hostConfig(func(c *kubeletconfigv1beta1.KubeletConfiguration) {
		c.ProtectKernelDefaults, c.FailSwapOn = true, ptr.To(false)
	})
	if err := CheckHost(protect, fakeHost(t, nil, good)); err != nil {
		t.Errorf("kernel as the kubelet needs it: %v", err)
	}
	bad := map[string]int{}
	for k, v := range good {
		bad[k] = v
	}
	bad["vm/overcommit_memory"], bad["kernel/panic"] = 0, 1
	err := CheckHost(protect, fakeHost(t, nil, bad))
	for _, want := range []string{
		"invalid kernel flag: vm/overcommit_memory, expected value: 1, actual value: 0",
		"invalid kernel flag: kernel/panic, expected value: 10, actual value: 1",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q", err, want)
		}
	}
	unprotected := hostConfig(func(c *kubeletconfigv1beta1.KubeletConfiguration) { c.FailSwapOn = ptr.To(false) })
	if err := CheckHost(unprotected, fakeHost(t, nil, bad)); err != nil {
		t.Errorf("without protectKernelDefaults: %v", err)
	}
}

// TestCheckHostCgroupV1 runs against this machine's real cgroup root.
func TestCheckHostCgroupV1(t *testing.T) {
	_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	v2 := err == nil
	h := fakeHost(t, nil, nil)
	failV1 := hostConfig(func(c *kubeletconfigv1beta1.KubeletConfiguration) { c.FailCgroupV1 = ptr.To(true) })
	err = CheckHost(failV1, h)
	if v2 && err != nil {
		t.Errorf("cgroup v2 host, failCgroupV1: %v", err)
	}
	if !v2 && (err == nil || !strings.Contains(err.Error(), "kubelet is configured to not run on a host using cgroup v1")) {
		t.Errorf("cgroup v1 host, failCgroupV1: %v", err)
	}
	noOOMGroup := hostConfig(func(c *kubeletconfigv1beta1.KubeletConfiguration) { c.SingleProcessOOMKill = ptr.To(false) })
	if err := CheckHost(noOOMGroup, h); !v2 && err == nil {
		t.Error("cgroup v1 host, singleProcessOOMKill false: accepted")
	}
	if err := CheckHost(hostConfig(func(*kubeletconfigv1beta1.KubeletConfiguration) {}), h); err != nil {
		t.Errorf("defaults: %v", err)
	}
}
