package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/skiff-sh/skiff/test/kubeletconfig"
)

// The two kubelets under test.
const (
	skiff    = "skiff"
	upstream = "upstream"
)

// nodeName is the Node both kubelets register, one at a time: the same
// name, credentials and config, so neither gets a different apiserver path.
const nodeName = "bench-node"

// kubeletSpec says how to run one kubelet as the bench node.
type kubeletSpec struct {
	kind       string // skiff or upstream
	bin        string
	config     string // the shared KubeletConfiguration
	kubeconfig string
	cri        string
	dir        string // this run's root dir, log and profile live here
	profile    string // skiff only: CPU profile path, "" for none
}

// kubeletProc is a running kubelet.
type kubeletProc struct {
	cmd     *exec.Cmd
	pid     int
	logPath string
	exited  chan struct{}
}

func (s kubeletSpec) args() []string {
	args := []string{
		"--config", s.config,
		"--kubeconfig", s.kubeconfig,
		"--container-runtime-endpoint", s.cri,
		"--root-dir", filepath.Join(s.dir, "root"),
		"--hostname-override", nodeName,
		"--v", "1",
	}
	switch s.kind {
	case skiff:
		// PodStartupBreakdown events: the benchmark's per-phase breakdown.
		args = append(args, "--pod-startup-breakdown-events")
		if s.profile != "" {
			args = append(args, "--cpu-profile", s.profile)
		}
	case upstream:
		args = append(args, "--cert-dir", filepath.Join(s.dir, "pki"))
	}
	return args
}

func startKubelet(s kubeletSpec) (*kubeletProc, error) {
	if err := os.MkdirAll(filepath.Join(s.dir, "root"), 0o750); err != nil {
		return nil, err
	}
	logPath := filepath.Join(s.dir, s.kind+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(s.bin, s.args()...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group; killed with the benchmark if it dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", s.kind, err)
	}
	p := &kubeletProc{cmd: cmd, pid: cmd.Process.Pid, logPath: logPath, exited: make(chan struct{})}
	_, err = os.Stat(upstreamFixedDir)
	left := os.IsNotExist(err)
	go func() {
		_ = cmd.Wait()
		logf.Close()
		if left {
			_ = os.RemoveAll(upstreamFixedDir)
		}
		close(p.exited)
	}()
	return p, nil
}

// upstreamFixedDir is where the upstream kubelet makes its device plugin
// socket whatever its --root-dir. Left behind, it makes kubeadm's
// preflight (and TestKubeadmJoin) refuse the machine, so a run that made
// it removes it.
const upstreamFixedDir = "/var/lib/kubelet"

// stop sends SIGTERM and waits; SIGKILL after 30 s.
func (p *kubeletProc) stop() error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return nil
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		<-p.exited
		return fmt.Errorf("kubelet pid %d did not stop within 30s of SIGTERM", p.pid)
	}
}

func (p *kubeletProc) alive() error {
	select {
	case <-p.exited:
		return fmt.Errorf("kubelet exited: %s", tailFile(p.logPath, 20))
	default:
		return nil
	}
}

// kubeletConfig is the KubeletConfiguration both kubelets run with (Skiff
// reads the same file), the suite's comparison settings.
func kubeletConfig(cri string, port, healthzPort int, clientCA string) string {
	return kubeletconfig.Comparison{Endpoint: cri, Port: port, HealthzPort: healthzPort, ClientCAFile: clientCA}.YAML()
}

// waitNode waits for the bench Node to be Ready.
func (b *bench) waitNodeReady(ctx context.Context, p *kubeletProc, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if err := p.alive(); err != nil {
			return err
		}
		if n, err := b.nodes.Get(ctx, nodeName, getOpts); err == nil && nodeIsReady(n) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("node %s not Ready within %s: %s", nodeName, timeout, tailFile(p.logPath, 20))
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := splitLines(string(b))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	out := ""
	for _, l := range lines {
		out += "\n  " + l
	}
	return out
}
