//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The dev containerd is run by hack/containerd.sh; its pid file tells
// which process to stop. Only containerd itself stops: the shims and the
// containers under them keep running, as on a real node.
const containerdPidFile = "/run/skiff-dev/containerd.pid"

func stopContainerd(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(containerdPidFile)
	must(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	must(t, err)
	must(t, syscall.Kill(pid, syscall.SIGTERM))
	waitFor(t, 30*time.Second, "containerd to exit", func() (bool, error) {
		return syscall.Kill(pid, 0) != nil, nil
	})
}

func startContainerd(t *testing.T) {
	t.Helper()
	cmd := exec.Command("../../hack/containerd.sh", "start")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("restarting containerd: %v\n%s", err, out)
	}
}
