//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// kubeletUnit runs a kubelet as kubeadm's packaged systemd unit does
// (kubelet.service with the 10-kubeadm.conf drop-in):
//
//	Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
//	Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
//	EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
//	EnvironmentFile=-/etc/default/kubelet
//	ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
//	Restart=always
//
// The environment files are read at every start, as systemd does, so a
// kubelet that exits (it does until kubeadm has written its files) comes
// back with what kubeadm wrote. This machine has no systemd as PID 1.
type kubeletUnit struct {
	t       *testing.T
	bin     string // the executable named kubelet
	logPath string
	// restartDelay is the unit's RestartSec (10 s in kubeadm's unit).
	// kubeadm cannot stop the kubelet here (no systemd) while it writes
	// config.yaml and then kubeadm-flags.env, so a start that reads the
	// environment files between the two writes would run with the new
	// config but the old flags; the unit's long RestartSec makes that
	// window rare, as kubeadm's stop makes it impossible under systemd.
	restartDelay time.Duration

	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	starts int
}

var unitEnvironment = map[string]string{
	"KUBELET_KUBECONFIG_ARGS": "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf",
	"KUBELET_CONFIG_ARGS":     "--config=/var/lib/kubelet/config.yaml",
}

var unitEnvironmentFiles = []string{"/var/lib/kubelet/kubeadm-flags.env", "/etc/default/kubelet"}

const unitExecStart = "$KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS"

// start runs the supervisor loop until stop.
func (u *kubeletUnit) start() {
	ctx, cancel := context.WithCancel(context.Background())
	u.cancel, u.done = cancel, make(chan struct{})
	go func() {
		defer close(u.done)
		for {
			u.runOnce(ctx)
			select {
			case <-ctx.Done():
				return
			case <-time.After(u.restartDelay):
			}
		}
	}()
}

// runOnce starts the kubelet with the unit's command line and waits for it
// to exit, or stops it (SIGTERM, as systemctl stop) when ctx ends.
func (u *kubeletUnit) runOnce(ctx context.Context) {
	env, err := unitEnv()
	if err != nil {
		u.logf("kubelet.service: %v", err)
		return
	}
	args := expandExecStart(unitExecStart, env)
	logf, err := os.OpenFile(u.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		u.t.Errorf("kubelet log: %v", err)
		return
	}
	defer logf.Close()
	fmt.Fprintf(logf, "=== kubelet.service: starting %s %q\n", u.bin, args)
	cmd := exec.Command(u.bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(logf, "=== kubelet.service: %v\n", err)
		return
	}
	u.mu.Lock()
	u.starts++
	u.mu.Unlock()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		fmt.Fprintf(logf, "=== kubelet.service: main process exited: %v\n", err)
	case <-ctx.Done():
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			u.t.Errorf("the kubelet did not stop within 30s of SIGTERM")
		}
	}
}

func (u *kubeletUnit) logf(format string, args ...any) {
	f, err := os.OpenFile(u.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "=== "+format+"\n", args...)
}

// stop stops the kubelet and the loop.
func (u *kubeletUnit) stop() {
	if u.cancel == nil {
		return
	}
	u.cancel()
	<-u.done
	u.cancel = nil
}

// unitEnv is the unit's Environment= plus its EnvironmentFile=s (missing
// ones skipped, as the "-" prefix says), later ones winning.
func unitEnv() (map[string]string, error) {
	env := map[string]string{}
	for k, v := range unitEnvironment {
		env[k] = v
	}
	for _, path := range unitEnvironmentFiles {
		b, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for k, v := range parseEnvironmentFile(string(b)) {
			env[k] = v
		}
	}
	return env, nil
}

// parseEnvironmentFile reads KEY=VALUE lines as systemd does for the
// simple cases kubeadm writes: comments and blank lines skipped, one pair
// of surrounding double or single quotes removed.
func parseEnvironmentFile(s string) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		out[strings.TrimSpace(k)] = v
	}
	return out
}

// expandExecStart expands each unquoted $VAR word of an ExecStart line
// into the variable's whitespace-separated words, as systemd does; an
// unset or empty variable gives no argument.
func expandExecStart(line string, env map[string]string) []string {
	var args []string
	for _, w := range strings.Fields(line) {
		if strings.HasPrefix(w, "$") {
			args = append(args, strings.Fields(env[w[1:]])...)
			continue
		}
		args = append(args, w)
	}
	return args
}
