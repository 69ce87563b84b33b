//go:build e2e

package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runSkiffToExit starts Skiff with a config and expects it to refuse to
// start: it exits 1 and says why on stderr.
func runSkiffToExit(t *testing.T, config string) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	must(t, os.WriteFile(path, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"+config), 0o644))
	cmd := exec.Command(skiffBin, "--config", path, "--root-dir", filepath.Join(dir, "root"),
		"--container-runtime-endpoint", criEndpoint, "--hostname-override", nodeName)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	done := make(chan error, 1)
	must(t, cmd.Start())
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Fatalf("skiff exited with %v, want exit code 1; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("skiff started instead of refusing; stderr:\n%s", tail(stderr.String(), 20))
	}
	return stderr.String()
}

// readSysctl reads a kernel setting of this machine.
func readSysctl(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc/sys", name))
	must(t, err)
	return strings.TrimSpace(string(b))
}

// TestRefusesToStartAsUpstream: on this machine's real state, Skiff
// refuses what the upstream kubelet refuses, with upstream's reason.
func TestRefusesToStartAsUpstream(t *testing.T) {
	t.Run("unknown feature gate", func(t *testing.T) {
		out := runSkiffToExit(t, "featureGates: {NoSuchGate: true}\n")
		if !strings.Contains(out, "unrecognized feature gate: NoSuchGate") {
			t.Errorf("stderr: %s", out)
		}
	})
	t.Run("failCgroupV1", func(t *testing.T) {
		if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
			t.Skip("this host runs cgroup v2")
		}
		out := runSkiffToExit(t, "failCgroupV1: true\nfailSwapOn: false\n")
		if !strings.Contains(out, "kubelet is configured to not run on a host using cgroup v1") {
			t.Errorf("stderr: %s", out)
		}
	})
	t.Run("protectKernelDefaults", func(t *testing.T) {
		got := readSysctl(t, "vm/overcommit_memory")
		if got == "1" {
			t.Skip("vm.overcommit_memory is already the kubelet's 1 here")
		}
		out := runSkiffToExit(t, "protectKernelDefaults: true\nfailSwapOn: false\n")
		if !strings.Contains(out, "invalid kernel flag: vm/overcommit_memory, expected value: 1, actual value: "+got) {
			t.Errorf("stderr: %s", out)
		}
	})
	t.Run("failSwapOn", func(t *testing.T) {
		if !swapIsOn(t) {
			swapOnForTest(t)
		}
		out := runSkiffToExit(t, "")
		if !strings.Contains(out, "running with swap on is not supported") {
			t.Errorf("stderr: %s", out)
		}
	})
}

func swapIsOn(t *testing.T) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/swaps")
	must(t, err)
	return len(strings.Split(strings.TrimSpace(string(b)), "\n")) > 1
}

// swapOnForTest turns on a 16 MiB swap file at the lowest priority until
// the test ends: swap really on, as failSwapOn is about.
func swapOnForTest(t *testing.T) {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "skiff-e2e-swap") // not a tmpfs, which cannot hold swap
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	file := filepath.Join(dir, "swapfile")
	must(t, os.WriteFile(file, make([]byte, 16<<20), 0o600))
	for _, args := range [][]string{{"mkswap", file}, {"swapon", "--priority", "-2", file}} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Skipf("cannot turn swap on here: %s: %v: %s", args[0], err, out)
		}
	}
	t.Cleanup(func() {
		if out, err := exec.Command("swapoff", file).CombinedOutput(); err != nil {
			t.Errorf("swapoff %s: %v: %s", file, err, out)
		}
	})
	if !swapIsOn(t) {
		t.Fatal("swapon succeeded but /proc/swaps lists nothing")
	}
}
