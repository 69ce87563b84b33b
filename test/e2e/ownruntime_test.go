//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	remote "k8s.io/cri-client/pkg"
	"k8s.io/klog/v2"
)

// hack/containerd.sh config writes a working configuration for a
// containerd of a test's own, in the format of the suite's runtime version:
// that version's binary (hack/containerd.sh bindir) starts on it with its
// own root, state and socket, loads the CRI plugin and answers CRI as the
// version it is.
func TestOwnContainerdFromConfigScript(t *testing.T) {
	dir := t.TempDir()
	script := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("../../hack/containerd.sh", args...).Output()
		if err != nil {
			t.Fatalf("hack/containerd.sh %s: %v", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	cfg := script("config", dir)
	binDir := script("bindir")
	if cfg != filepath.Join(dir, "containerd.toml") {
		t.Fatalf("config written to %q, want it in %s", cfg, dir)
	}

	logf, err := os.Create(filepath.Join(dir, "containerd.log"))
	must(t, err)
	defer logf.Close()
	cmd := exec.Command(filepath.Join(binDir, "containerd"), "--config", cfg)
	cmd.Env = append(os.Environ(), "PATH="+binDir+":"+os.Getenv("PATH"))
	cmd.Stdout, cmd.Stderr = logf, logf
	must(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("test containerd log:\n%s", tail(string(b), 40))
		}
	})

	sock := filepath.Join(dir, "containerd.sock")
	waitFor(t, 60*time.Second, "the test containerd's CRI plugin", func() (bool, error) {
		select {
		case err := <-exited:
			exited <- err
			return false, fmt.Errorf("the test containerd exited: %v", err)
		default:
		}
		out, err := exec.Command(filepath.Join(binDir, "ctr"), "--address", sock, "plugins", "ls").Output()
		return err == nil && criPluginOK.Match(out), nil
	})

	logger := klog.Background()
	rs, err := remote.NewRemoteRuntimeService("unix://"+sock, 30*time.Second, nil, &logger)
	must(t, err)
	v, err := rs.Version(context.Background(), "v1")
	must(t, err)
	if !isSuiteRuntimeVersion(t, v.RuntimeName+"://"+v.RuntimeVersion) {
		t.Errorf("the test containerd is %s %s, not SKIFF_RUNTIME=%q's version", v.RuntimeName, v.RuntimeVersion, os.Getenv("SKIFF_RUNTIME"))
	}
	st, err := rs.Status(context.Background(), false)
	must(t, err)
	for _, c := range st.Status.Conditions {
		if c.Type == "RuntimeReady" && !c.Status {
			t.Errorf("the test containerd's runtime is not ready: %+v", c)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "root")); err != nil {
		t.Errorf("the test containerd's root is not in its directory: %v", err)
	}
}
