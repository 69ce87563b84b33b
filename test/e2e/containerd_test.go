//go:build e2e

package e2e

import (
	"errors"
	"fmt"
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
	must(t, stopDevContainerd())
}

func startContainerd(t *testing.T) {
	t.Helper()
	must(t, startDevContainerd())
}

// stopDevContainerd stops the dev containerd daemon (not its shims) and
// waits up to 30 s for it to exit.
func stopDevContainerd() error {
	b, err := os.ReadFile(containerdPidFile)
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("containerd pid file: %w", err)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("stopping containerd: %w", err)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if syscall.Kill(pid, 0) != nil {
			return nil
		}
	}
	return errors.New("containerd did not exit within 30s of SIGTERM")
}

func startDevContainerd() error {
	out, err := exec.Command("../../hack/containerd.sh", "start").CombinedOutput()
	if err != nil {
		return fmt.Errorf("starting containerd: %w\n%s", err, out)
	}
	return nil
}

// restartDevContainerd restarts the dev containerd daemon; its CRI plugin
// then reads every task's real state from the shims again.
func restartDevContainerd() error {
	if err := stopDevContainerd(); err != nil {
		return err
	}
	return startDevContainerd()
}
