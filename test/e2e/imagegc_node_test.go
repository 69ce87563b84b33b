//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/test/registry"
)

// A disk node is a cluster node whose Skiff runs on a containerd of the
// test's own, with containerd's root, Skiff's root directory and the pod
// logs on one small ext4 filesystem, loop-mounted for the test: nodefs
// and imagefs are that filesystem, and what pods write and images take
// fill it for real, without touching the host's disk or the dev
// containerd's images. Each has a name, cgroup root, bridge and subnet of
// its own, so disk nodes run in parallel with the other tests.
const (
	diskDirs   = "/var/lib/skiff-e2e-disk" // per node: the image file, the mountpoint, configs, logs
	diskStates = "/run/skiff-e2e-disk"     // per node: containerd's state and socket
)

var diskLeftovers sync.Once

// diskContainerdConfig is hack/containerd.sh's configuration (see there
// why each setting is needed on this machine) with the test's root,
// state, socket, sandbox image and a static CNI network.
const diskContainerdConfig = `version = 2
root = "%[1]s/containerd"
state = "%[2]s/state"
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.internal.v1.opt",
]

[grpc]
  address = "%[2]s/containerd.sock"

[plugins."io.containerd.grpc.v1.cri"]
  restrict_oom_score_adj = true
  sandbox_image = "%[3]s"
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "%[4]s/net.d"
`

type diskNode struct {
	*clusterNode
	dir, state string // under diskDirs and diskStates
	bridge     string
	mnt        string // the small filesystem's mountpoint
	sock       string
	logsDir    string // podLogsDir, on the small filesystem
	sandbox    string // the sandbox image
	runtime    internalapi.RuntimeService
	images     internalapi.ImageManagerService
	ctrd       *exec.Cmd
	ctrdDone   chan struct{}
}

// newDiskNode prepares (does not start) a cluster node on a filesystem of
// sizeMiB with its own containerd, which has the dev containerd's sandbox
// and busybox images. The cleanups, which run after the node's own (its
// pods deleted, Skiff stopped), stop containerd and what it ran, and
// remove the filesystem.
func newDiskNode(t *testing.T, sizeMiB int) *diskNode {
	t.Helper()
	t.Parallel()
	checkGroup(t, false)
	diskLeftovers.Do(func() { removeDiskLeftovers(t) })
	id := nextPrivateID(t) // a subnet apart from the private runtimes'
	dn := &diskNode{
		dir:    filepath.Join(diskDirs, fmt.Sprint(id)),
		state:  filepath.Join(diskStates, fmt.Sprint(id)),
		bridge: fmt.Sprintf("skiffdk%d", id),
	}
	dn.mnt, dn.sock = filepath.Join(dn.dir, "mnt"), filepath.Join(dn.state, "containerd.sock")
	dn.sandbox = runtimeSandboxImage(t)
	t.Cleanup(func() { dn.teardown(t) })
	must(t, os.MkdirAll(dn.mnt, 0o755))
	must(t, os.MkdirAll(filepath.Join(dn.dir, "net.d"), 0o755))
	img := filepath.Join(dn.dir, "disk.img")
	run(t, "truncate", "-s", fmt.Sprintf("%dM", sizeMiB), img)
	// No blocks reserved for root (available is all that is free) and
	// inode tables written now, not by a kernel thread during the test.
	run(t, "mkfs.ext4", "-q", "-F", "-m", "0", "-E", "lazy_itable_init=0,lazy_journal_init=0", img)
	run(t, "mount", "-o", "loop", img, dn.mnt)
	dn.startContainerd(t, fmt.Sprintf("10.%d.0.0/24", 100+id))
	dn.importImages(t, dn.sandbox, busybox)

	cgroupRoot := fmt.Sprintf("/skiff-e2e-disk%d", id)
	n := prepareNode(t, cgroupRoot)
	n.name, n.endpoint = fmt.Sprintf("%s-%d", nodeName, id), "unix://"+dn.sock
	// The node's images are on a disk of its own: the defaults apply.
	b, err := os.ReadFile(n.config)
	must(t, err)
	must(t, os.WriteFile(n.config, []byte(strings.Replace(string(b), hostDiskConfig, "", 1)), 0o644))
	c := getCluster(t)
	t.Cleanup(func() {
		removeCgroups(t, cgroupRoot)
		_ = c.Client().CoreV1().Nodes().Delete(context.Background(), n.name, metav1.DeleteOptions{})
	})
	t.Cleanup(n.cleanup)
	dn.clusterNode = joinCluster(t, c, n)
	dn.root = filepath.Join(dn.mnt, "kubelet")
	dn.logsDir = filepath.Join(dn.mnt, "pod-logs")
	dn.appendConfig("podLogsDir: " + dn.logsDir + "\n")
	return dn
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

func (dn *diskNode) startContainerd(t *testing.T, subnet string) {
	t.Helper()
	cfg := filepath.Join(dn.dir, "containerd.toml")
	must(t, os.WriteFile(cfg, []byte(fmt.Sprintf(diskContainerdConfig, dn.mnt, dn.state, dn.sandbox, dn.dir)), 0o644))
	must(t, os.WriteFile(filepath.Join(dn.dir, "net.d", "10-skiff-e2e-disk.conflist"),
		[]byte(bridgeCNIConfig("skiff-e2e-disk", dn.bridge, dn.dir, subnet)), 0o644))
	logPath := filepath.Join(dn.dir, "containerd.log")
	logf, err := os.Create(logPath)
	must(t, err)
	dn.ctrd = exec.Command("containerd", "--config", cfg)
	dn.ctrd.Stdout, dn.ctrd.Stderr = logf, logf
	dn.ctrd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	must(t, dn.ctrd.Start())
	dn.ctrdDone = make(chan struct{})
	go func() { _ = dn.ctrd.Wait(); logf.Close(); close(dn.ctrdDone) }()
	must(t, os.WriteFile(filepath.Join(dn.dir, "containerd.pid"), []byte(strconv.Itoa(dn.ctrd.Process.Pid)), 0o644))
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("test containerd log:\n%s", tail(string(b), 40))
		}
	})
	waitFor(t, 90*time.Second, "the test containerd's CRI plugin", func() (bool, error) {
		select {
		case <-dn.ctrdDone:
			b, _ := os.ReadFile(logPath)
			return false, fmt.Errorf("containerd exited: %s", tail(string(b), 20))
		default:
		}
		out, err := exec.Command("ctr", "--address", dn.sock, "plugins", "ls").CombinedOutput()
		return err == nil && criPluginOK.Match(out), nil
	})
	logger := klog.Background()
	dn.runtime, err = remote.NewRemoteRuntimeService("unix://"+dn.sock, 30*time.Second, nil, &logger)
	must(t, err)
	dn.images, err = remote.NewRemoteImageService("unix://"+dn.sock, 30*time.Second, nil, &logger)
	must(t, err)
}

// importImages copies images from the dev containerd.
func (dn *diskNode) importImages(t *testing.T, refs ...string) {
	t.Helper()
	tarball := filepath.Join(t.TempDir(), "images.tar")
	dev := strings.TrimPrefix(criEndpoint, "unix://")
	run(t, "ctr", append([]string{"--address", dev, "-n", "k8s.io", "images", "export", tarball}, refs...)...)
	run(t, "ctr", "--address", dn.sock, "-n", "k8s.io", "images", "import", "--snapshotter", "overlayfs", tarball)
}

// teardown stops containerd, kills the shims and containers it started
// (their command lines name its socket), unmounts what they left and the
// filesystem, and removes the bridge.
func (dn *diskNode) teardown(t *testing.T) {
	if dn.ctrd != nil {
		_ = dn.ctrd.Process.Signal(syscall.SIGTERM)
		select {
		case <-dn.ctrdDone:
		case <-time.After(15 * time.Second):
			_ = dn.ctrd.Process.Kill()
			<-dn.ctrdDone
		}
	}
	dn.cleanupLeftovers(t)
}

// cleanupLeftovers removes what a test containerd left: its process (from
// a run cut short), its shims and their containers, mounts under its root
// and state, the filesystem and the bridge.
func (dn *diskNode) cleanupLeftovers(t *testing.T) {
	if b, err := os.ReadFile(filepath.Join(dn.dir, "containerd.pid")); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); strings.HasSuffix(exe, "/containerd") {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	removePrivate(t, dn.dir, dn.state, dn.sock, dn.bridge)
}

// removeDiskLeftovers removes the disk nodes of a run cut short.
func removeDiskLeftovers(t *testing.T) {
	entries, _ := os.ReadDir(diskDirs)
	for _, e := range entries {
		if !e.IsDir() || !ownLeftover(e.Name()) {
			continue
		}
		dn := &diskNode{dir: filepath.Join(diskDirs, e.Name()), state: filepath.Join(diskStates, e.Name()), bridge: "skiffdk" + e.Name()}
		dn.mnt, dn.sock = filepath.Join(dn.dir, "mnt"), filepath.Join(dn.state, "containerd.sock")
		dn.cleanupLeftovers(t)
	}
}

// processesWith are the pids whose command line contains every part.
func processesWith(parts ...string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cmd, all := strings.ReplaceAll(string(b), "\x00", " "), true
		for _, p := range parts {
			all = all && strings.Contains(cmd, p)
		}
		if all {
			out = append(out, pid)
		}
	}
	return out
}

// childrenOf are the direct children of pid.
func childrenOf(pid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The command name (in parentheses) may hold spaces: split after it.
		s := string(b)
		f := strings.Fields(s[strings.LastIndex(s, ")")+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}

// mountsUnder are the mountpoints under any of the prefixes, deepest first.
func mountsUnder(prefixes ...string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		for _, p := range prefixes {
			if strings.HasPrefix(fields[4], p) {
				out = append(out, fields[4])
				break
			}
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(out)))
	return out
}

// fs is the small filesystem's capacity and what is available on it, as
// statfs tells Skiff.
func (dn *diskNode) fs(t *testing.T) (capacity, available int64) {
	t.Helper()
	var st syscall.Statfs_t
	must(t, syscall.Statfs(dn.mnt, &st))
	return int64(st.Blocks) * st.Bsize, int64(st.Bavail) * st.Bsize
}

// usagePercent is the filesystem's use as image GC computes it.
func (dn *diskNode) usagePercent(t *testing.T) int {
	capacity, available := dn.fs(t)
	return 100 - int(available*100/capacity)
}

// hasImage asks the test containerd whether it has the image.
func (dn *diskNode) hasImage(t *testing.T, ref string) bool {
	t.Helper()
	st, err := dn.images.ImageStatus(context.Background(), &runtimeapi.ImageSpec{Image: ref}, false)
	must(t, err)
	return st.GetImage() != nil
}

func (dn *diskNode) pull(t *testing.T, ref string) {
	t.Helper()
	if _, err := dn.images.PullImage(context.Background(), &runtimeapi.ImageSpec{Image: ref}, nil, nil); err != nil {
		t.Fatalf("pull %s: %v", ref, err)
	}
}

// containersOf are the test containerd's containers of a pod.
func (dn *diskNode) containersOf(t *testing.T, uid string) []*runtimeapi.Container {
	t.Helper()
	c, err := dn.runtime.ListContainers(context.Background(), &runtimeapi.ContainerFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.uid": uid}})
	must(t, err)
	return c
}

// output is what the main container of a pod of the test namespace
// printed so far.
func (dn *diskNode) output(t *testing.T, name string) string {
	t.Helper()
	p, err := dn.admin.CoreV1().Pods(dn.ns).Get(dn.ctx(), name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	b, _ := os.ReadFile(filepath.Join(dn.logsDir, dn.ns+"_"+name+"_"+string(p.UID), "main", "0.log"))
	return string(b)
}

// nodeEvents are the events about the test node since a time.
func (dn *diskNode) nodeEvents(t *testing.T, reason string, since time.Time) []v1.Event {
	t.Helper()
	evs, err := dn.admin.CoreV1().Events("default").List(dn.ctx(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + dn.hostname() + ",reason=" + reason})
	must(t, err)
	var out []v1.Event
	for _, e := range evs.Items {
		last := e.LastTimestamp.Time
		if last.IsZero() {
			last = e.EventTime.Time
		}
		if !last.Before(since.Truncate(time.Second)) {
			out = append(out, e)
		}
	}
	return out
}

// sizedImage builds an image of busybox and mib MiB of random data (which
// no compression shrinks), pushes it as repo:1 and returns its reference.
func sizedImage(t *testing.T, r *registry.Registry, repo string, mib int) string {
	t.Helper()
	dir := t.TempDir()
	blob := filepath.Join(dir, "blob")
	f, err := os.Create(blob)
	must(t, err)
	_, err = io.CopyN(f, rand.Reader, int64(mib)<<20)
	must(t, err)
	must(t, f.Close())
	archive := filepath.Join(dir, "image.tar")
	must(t, registry.BuildImage(context.Background(), archive, "e2e/"+repo+":1",
		"--add", "/bin/busybox:/bin/busybox", "--busybox-links", "--add", blob+":/blob", "--cmd", "sh"))
	_, err = r.Push(context.Background(), archive, repo, "1")
	must(t, err)
	return r.Host + "/" + repo + ":1"
}

// testRegistryFor starts a plain registry for the test.
func testRegistryFor(t *testing.T) *registry.Registry {
	t.Helper()
	r, err := registry.Start(context.Background(), registry.Options{})
	must(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("registry log:\n%s", r.LogTail())
		}
		_ = r.Stop()
	})
	return r
}
