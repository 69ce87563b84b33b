//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	internalapi "k8s.io/cri-api/pkg/apis"
	remote "k8s.io/cri-client/pkg"
	"k8s.io/klog/v2"
)

// A private runtime is a containerd of one test's own, on the suite's
// version and with the dev containerd's settings and images, but its own
// root, state, socket, pod network (bridge and subnet) and cgroup root. A
// Skiff on it shares nothing with another Skiff's runtime, so its test
// can run in parallel with the others.
type privateRuntime struct {
	id               int32
	dir, state, sock string
	config, binDir   string
	endpoint         string
	cgroupRoot       string
	bridge, subnet   string
	rs               internalapi.RuntimeService
	cmd              *exec.Cmd
	exited           chan struct{}
}

const (
	privateDir   = "/var/lib/skiff-e2e-rt" // roots, configs, logs
	privateState = "/run/skiff-e2e-rt"     // states and sockets
)

var (
	privateSeq     atomic.Int32
	privateCleanup sync.Once
	imagesOnce     sync.Once
	imagesTar      string
	imagesErr      error
)

// newPrivateRuntime starts a private runtime that the test's cleanup stops,
// with every container it ran.
func newPrivateRuntime(t *testing.T) *privateRuntime {
	t.Helper()
	privateCleanup.Do(func() { removePrivateLeftovers(t) })
	checkGroup(t, false)
	n := nextPrivateID(t)
	r := &privateRuntime{
		id:         n,
		dir:        filepath.Join(privateDir, fmt.Sprint(n)),
		state:      filepath.Join(privateState, fmt.Sprint(n)),
		cgroupRoot: fmt.Sprintf("/skiff-e2e-rt%d", n),
		bridge:     fmt.Sprintf("skiffrt%d", n),
		subnet:     fmt.Sprintf("10.%d.0.0/24", 100+n),
	}
	r.sock = filepath.Join(r.state, "containerd.sock")
	r.endpoint = "unix://" + r.sock
	t.Cleanup(func() { r.stop(t) })
	must(t, os.MkdirAll(r.state, 0o755))
	out, err := exec.Command("../../hack/containerd.sh", "config", r.dir, "--state", r.state).Output()
	if err != nil {
		t.Fatalf("hack/containerd.sh config: %v", err)
	}
	cfg := strings.TrimSpace(string(out))
	r.config = cfg
	b, err := os.ReadFile(cfg)
	must(t, err)
	// The config puts the socket in the directory; the state dir keeps the
	// path short (a unix socket's path has at most 107 bytes).
	must(t, os.WriteFile(cfg, []byte(strings.Replace(string(b), filepath.Join(r.dir, "containerd.sock"), r.sock, 1)), 0o644))
	conflist := bridgeCNIConfig("skiff-e2e-rt", r.bridge, r.dir, r.subnet)
	must(t, os.WriteFile(filepath.Join(r.dir, "net.d", "10-skiff-e2e-rt.conflist"), []byte(conflist), 0o644))
	out, err = exec.Command("../../hack/containerd.sh", "bindir").Output()
	if err != nil {
		t.Fatalf("hack/containerd.sh bindir: %v", err)
	}
	r.binDir = strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(r.logPath())
			t.Logf("private containerd log:\n%s", tail(string(b), 40))
		}
	})
	r.start(t)
	logger := klog.Background()
	r.rs, err = remote.NewRemoteRuntimeService(r.endpoint, 30*time.Second, nil, &logger)
	must(t, err)
	r.importImages(t)
	return r
}

func (r *privateRuntime) logPath() string { return filepath.Join(r.dir, "containerd.log") }

// start starts the daemon and waits for its CRI plugin.
func (r *privateRuntime) start(t *testing.T) {
	t.Helper()
	logf, err := os.OpenFile(r.logPath(), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	must(t, err)
	r.cmd = exec.Command(filepath.Join(r.binDir, "containerd"), "--config", r.config)
	// The daemon starts its shims by name from its PATH.
	r.cmd.Env = append(os.Environ(), "PATH="+r.binDir+":"+os.Getenv("PATH"))
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	must(t, r.cmd.Start())
	exited := make(chan struct{})
	r.exited = exited
	go func() { _ = r.cmd.Wait(); logf.Close(); close(exited) }()
	waitFor(t, 60*time.Second, "the private containerd's CRI plugin", func() (bool, error) {
		select {
		case <-exited:
			b, _ := os.ReadFile(r.logPath())
			return false, fmt.Errorf("the private containerd exited: %s", tail(string(b), 20))
		default:
		}
		out, err := exec.Command(ctrBin(t), "--address", r.sock, "plugins", "ls").CombinedOutput()
		return err == nil && criPluginOK.Match(out), nil
	})
}

// stopDaemon stops containerd only: shims and containers keep running,
// and a restarted containerd adopts them (as hack/containerd.sh's).
func (r *privateRuntime) stopDaemon(t *testing.T) {
	t.Helper()
	must(t, r.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-r.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the private containerd did not exit within 30s of SIGTERM")
	}
	r.cmd = nil
}

// importImages copies the dev containerd's local images, exported once.
func (r *privateRuntime) importImages(t *testing.T) {
	t.Helper()
	imagesOnce.Do(func() {
		imagesTar = filepath.Join(privateDir, fmt.Sprintf("images-%d.tar", os.Getpid()))
		dev := strings.TrimPrefix(criEndpoint, "unix://")
		// The other test process's serial tests may be restarting the
		// dev containerd: retry for a while.
		for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(2 * time.Second) {
			out, err := exec.Command(ctrBin(t), "--address", dev, "-n", "k8s.io", "images", "export", imagesTar,
				"registry.k8s.io/pause:3.10", busybox, "skiff.local/grpchealth:1").CombinedOutput()
			if err == nil {
				imagesErr = nil
				break
			}
			imagesErr = fmt.Errorf("ctr images export: %v\n%s", err, out)
			if time.Now().After(deadline) {
				break
			}
		}
	})
	must(t, imagesErr)
	r.importArchive(t, imagesTar)
}

// importArchive imports an image archive into the runtime.
func (r *privateRuntime) importArchive(t *testing.T, tar string) {
	t.Helper()
	snapshotter := "overlayfs"
	var fs syscall.Statfs_t
	if syscall.Statfs(r.dir, &fs) == nil && fs.Type == 0x794c7630 { // overlayfs cannot stack on overlayfs
		snapshotter = "native"
	}
	if out, err := exec.Command(ctrBin(t), "--address", r.sock, "-n", "k8s.io", "images", "import",
		"--snapshotter", snapshotter, tar).CombinedOutput(); err != nil {
		t.Fatalf("ctr images import: %v\n%s", err, out)
	}
}

// stop removes every pod the runtime runs, stops it and removes what it
// left: shims, mounts, its directories, bridge and cgroups.
func (r *privateRuntime) stop(t *testing.T) {
	if r.rs != nil {
		ctx := context.Background()
		if sbs, err := r.rs.ListPodSandbox(ctx, nil); err == nil {
			for _, sb := range sbs {
				_ = r.rs.StopPodSandbox(ctx, sb.Id)
				_ = r.rs.RemovePodSandbox(ctx, sb.Id)
			}
		}
	}
	if r.cmd != nil && r.exited != nil {
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.exited:
		case <-time.After(15 * time.Second):
			_ = r.cmd.Process.Kill()
			<-r.exited
		}
	}
	removePrivate(t, r.dir, r.state, r.sock, r.bridge)
	removeCgroups(t, r.cgroupRoot)
}

// removePrivate kills the shims of a containerd of a test's own (their
// command lines name its socket) with their containers, unmounts what
// they left (and any filesystem mounted under dir), and removes its
// directories and bridge.
func removePrivate(t *testing.T, dir, state, sock, bridge string) {
	for _, shim := range processesWith("containerd-shim", "-address "+sock) {
		for _, child := range childrenOf(shim) {
			_ = syscall.Kill(child, syscall.SIGKILL)
		}
		_ = syscall.Kill(shim, syscall.SIGKILL)
	}
	time.Sleep(300 * time.Millisecond) // the killed containers' mounts settle
	for _, m := range mountsUnder(dir+"/", state+"/") {
		if err := syscall.Unmount(m, 0); err != nil {
			if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
				t.Logf("unmount %s: %v", m, err)
			}
		}
	}
	_ = exec.Command("ip", "link", "del", bridge).Run()
	for _, p := range []string{dir, state} {
		if err := os.RemoveAll(p); err != nil {
			t.Logf("remove %s: %v", p, err)
		}
	}
}

// removePrivateLeftovers removes the private runtimes of a run cut short
// (their containerds died with it; shims and mounts did not).
func removePrivateLeftovers(t *testing.T) {
	entries, _ := os.ReadDir(privateState)
	for _, e := range entries {
		if !ownLeftover(e.Name()) {
			continue
		}
		state := filepath.Join(privateState, e.Name())
		removePrivate(t, filepath.Join(privateDir, e.Name()), state, filepath.Join(state, "containerd.sock"), "skiffrt"+e.Name())
	}
	entries, _ = os.ReadDir(privateDir)
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "images-%d.tar", &pid); err == nil && syscall.Kill(pid, 0) != nil {
			_ = os.Remove(filepath.Join(privateDir, e.Name()))
		}
		if ownLeftover(e.Name()) {
			_ = os.RemoveAll(filepath.Join(privateDir, e.Name()))
		}
	}
}
