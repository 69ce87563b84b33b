package podruntime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"

	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/cri"
	"github.com/skiff-sh/skiff/internal/volume"
)

// mountingRuntime reports a container's mounts in its status, as
// containerd does: the config's mounts, in order.
type mountingRuntime struct {
	*critest.FakeRuntimeService
}

func (r *mountingRuntime) CreateContainer(ctx context.Context, sb string, cfg *runtimeapi.ContainerConfig, sbCfg *runtimeapi.PodSandboxConfig) (string, error) {
	id, err := r.FakeRuntimeService.CreateContainer(ctx, sb, cfg, sbCfg)
	if err == nil {
		r.Lock()
		r.Containers[id].Mounts = cfg.Mounts
		r.Unlock()
	}
	return id, err
}

const hostSecret = "host file content the pod may only read"

// hostFileFixture is a pod whose container mounts a read-only hostPath
// file at its terminationMessagePath. With noTermFile, Skiff cannot make
// the termination file: "containers" in the pod directory is a file, as
// a full disk would refuse the directory.
type hostFileFixture struct {
	*fixture
	podDir, hostFile string
	vols             map[string]volume.Mounted
}

func newHostFileFixture(t *testing.T, noTermFile bool) *hostFileFixture {
	f := newFixture(t, v1.RestartPolicyAlways)
	f.m.cfg.CRI.Runtime = &mountingRuntime{f.rt}
	podDir := t.TempDir()
	f.m.cfg.PodDir = func(types.UID) string { return podDir }
	if noTermFile {
		if err := os.WriteFile(filepath.Join(podDir, "containers"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	hostFile := filepath.Join(t.TempDir(), "host-file")
	if err := os.WriteFile(hostFile, []byte(hostSecret), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &f.pod.Spec.Containers[0]
	c.TerminationMessagePath = "/dev/termination-log"
	c.TerminationMessagePolicy = v1.TerminationMessageReadFile
	c.VolumeMounts = []v1.VolumeMount{{Name: "host", MountPath: c.TerminationMessagePath, ReadOnly: true}}
	return &hostFileFixture{fixture: f, podDir: podDir, hostFile: hostFile,
		vols: map[string]volume.Mounted{"host": {HostPath: hostFile, ReadOnly: true}}}
}

func (f *hostFileFixture) sync() SyncResult {
	return f.m.SyncPod(context.Background(), f.pod, f.status(), f.vols)
}

// crashLoop runs the container through n failed attempts, back-offs
// stepped over, so container GC prunes the oldest instances.
func (f *hostFileFixture) crashLoop(n int) {
	f.t.Helper()
	for range n {
		if res := f.sync(); res.Err != nil || len(res.Waiting) > 0 {
			f.t.Fatalf("sync: err=%v waiting=%v", res.Err, res.Waiting)
		}
		f.exit("app", 1)
		f.clock.Step(backOffMax + time.Second)
	}
}

func (f *hostFileFixture) checkHostFile() {
	f.t.Helper()
	b, err := os.ReadFile(f.hostFile)
	if err != nil || string(b) != hostSecret {
		f.t.Fatalf("the read-only host file at terminationMessagePath: %q, %v; want it untouched", b, err)
	}
}

// A host file mounted at terminationMessagePath is the pod's to read,
// never Skiff's to remove: pruning dead instances leaves it in place.
func TestPruneLeavesHostFileAtTerminationPath(t *testing.T) {
	for _, noTermFile := range []bool{true, false} {
		f := newHostFileFixture(t, noTermFile)
		f.crashLoop(4) // the fourth start prunes the first instance
		if n := len(f.status().Instances("app")); n != 3 {
			t.Fatalf("noTermFile=%v: %d instances left of 4, want 3: no GC ran", noTermFile, n)
		}
		f.checkHostFile()
	}
}

// The status carries what the container wrote to the termination file
// Skiff made for it, and never the content of a host file mounted at the
// same path.
func TestTerminationMessageNeverHostContent(t *testing.T) {
	for _, noTermFile := range []bool{true, false} {
		f := newHostFileFixture(t, noTermFile)
		f.crashLoop(1)
		cs := f.status().FindContainer("app")
		if cs == nil || cs.State != container.StateExited {
			t.Fatalf("app: %+v", cs)
		}
		if strings.Contains(cs.Message, hostSecret) {
			t.Errorf("noTermFile=%v: status message %q holds the host file's content", noTermFile, cs.Message)
		}
		f.checkHostFile()
	}
	// With Skiff's own file in place, what the container wrote there is
	// the message.
	f := newHostFileFixture(t, false)
	f.sync()
	files, err := filepath.Glob(filepath.Join(f.podDir, "containers", "app", "*"))
	if err != nil || len(files) != 1 {
		t.Fatalf("termination files %v, %v", files, err)
	}
	if err := os.WriteFile(files[0], []byte("written by the container"), 0o666); err != nil {
		t.Fatal(err)
	}
	f.exit("app", 1)
	if cs := f.status().FindContainer("app"); cs.Message != "written by the container" {
		t.Errorf("message %q, want the termination file's content", cs.Message)
	}
}

// Reading the termination message never waits on a FIFO, whether one is
// mounted at terminationMessagePath (a subPath of a volume) or stands in
// place of Skiff's own termination file.
func TestTerminationMessageFIFONeverBlocks(t *testing.T) {
	t.Run("mounted at the path", func(t *testing.T) {
		f := newHostFileFixture(t, true)
		fifo := filepath.Join(t.TempDir(), "fifo")
		if err := unix.Mkfifo(fifo, 0o644); err != nil {
			t.Fatal(err)
		}
		f.vols["host"] = volume.Mounted{HostPath: fifo}
		f.crashLoop(1)
		checkStatusReturns(t, f)
	})
	t.Run("in place of the termination file", func(t *testing.T) {
		f := newHostFileFixture(t, false)
		f.pod.Spec.Containers[0].VolumeMounts = nil
		f.sync()
		files, err := filepath.Glob(filepath.Join(f.podDir, "containers", "app", "*"))
		if err != nil || len(files) != 1 {
			t.Fatalf("termination files %v, %v", files, err)
		}
		if err := os.Remove(files[0]); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mkfifo(files[0], 0o666); err != nil {
			t.Fatal(err)
		}
		f.exit("app", 1)
		checkStatusReturns(t, f)
	})
}

// checkStatusReturns reads the pod's status; a read stuck on a FIFO
// never returns, which the generous watchdog turns into a failure rather
// than a hung test binary.
func checkStatusReturns(t *testing.T, f *hostFileFixture) {
	t.Helper()
	done := make(chan *container.PodStatus, 1)
	go func() {
		st, err := f.m.GetPodStatus(context.Background(), cri.PodRef{UID: f.pod.UID, Name: "p", Namespace: "ns"})
		if err != nil {
			t.Errorf("GetPodStatus: %v", err)
		}
		done <- st
	}()
	select {
	case st := <-done:
		if cs := st.FindContainer("app"); cs == nil || cs.State != container.StateExited {
			t.Errorf("app: %+v", cs)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("reading the termination message blocks on a FIFO")
	}
}

func TestOwnTermFile(t *testing.T) {
	for _, tc := range []struct {
		container, hostPath string
		own                 bool
	}{
		{"app", "/pods/u/containers/app/0123abcd", true},
		{"app", "/pods/u/containers/app/../app/0123abcd", true},
		{"app", "/pods/u/containers/other/0123abcd", false},
		{"app", "/pods/u/containers/app/0123ABCD", false},
		{"app", "/pods/u/containers/app/0123abc", false},
		{"app", "/pods/u/volumes/kubernetes.io~empty-dir/app/0123abcd", false},
		{"app", "/pods/u/volume-subpaths/v/app/0", false},
		{"app", "/etc/0123abcd", false},
		{"..", "/pods/u/containers/../0123abcd", false},
		{"a/b", "/pods/u/containers/a/b/0123abcd", false},
	} {
		if _, own := ownTermFile("/pods/u", tc.container, tc.hostPath); own != tc.own {
			t.Errorf("ownTermFile(%q, %q) = %v, want %v", tc.container, tc.hostPath, own, tc.own)
		}
	}
	if _, own := ownTermFile("", "app", "containers/app/0123abcd"); own {
		t.Error("with no pod directory nothing is Skiff's")
	}
}

// A symlink anywhere between the pod directory and the termination file
// is refused, never followed: neither read nor removal reaches its target.
func TestTermFileRefusesSymlinks(t *testing.T) {
	outside := t.TempDir()
	if err := os.MkdirAll(filepath.Join(outside, "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(outside, "app", "0123abcd")
	if err := os.WriteFile(target, []byte(hostSecret), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, plant := range map[string]func(podDir string) error{
		"containers": func(podDir string) error { return os.Symlink(outside, filepath.Join(podDir, "containers")) },
		"container": func(podDir string) error {
			if err := os.Mkdir(filepath.Join(podDir, "containers"), 0o750); err != nil {
				return err
			}
			return os.Symlink(filepath.Join(outside, "app"), filepath.Join(podDir, "containers", "app"))
		},
		"file": func(podDir string) error {
			if err := os.MkdirAll(filepath.Join(podDir, "containers", "app"), 0o750); err != nil {
				return err
			}
			return os.Symlink(target, filepath.Join(podDir, "containers", "app", "0123abcd"))
		},
	} {
		podDir := t.TempDir()
		if err := plant(podDir); err != nil {
			t.Fatal(err)
		}
		tf, ok := ownTermFile(podDir, "app", filepath.Join(podDir, "containers", "app", "0123abcd"))
		if !ok {
			t.Fatalf("%s: not own", name)
		}
		if b, err := tf.read(MaxTerminationMessageLength); err == nil || len(b) > 0 {
			t.Errorf("symlinked %s: read %q, %v; want refused", name, b, err)
		}
		_ = tf.remove()
		if b, err := os.ReadFile(target); err != nil || string(b) != hostSecret {
			t.Fatalf("symlinked %s: the target is %q, %v after removal", name, b, err)
		}
		if _, err := createTermFile(podDir, "app"); name != "file" && err == nil {
			t.Errorf("symlinked %s: a termination file was made through it", name)
		}
		if left, _ := os.ReadDir(filepath.Join(outside, "app")); len(left) != 1 {
			t.Errorf("symlinked %s: files beyond it: %v", name, left)
		}
	}
}

// Only the last 4 KiB of a long termination file are read.
func TestTermFileReadBounded(t *testing.T) {
	podDir := t.TempDir()
	path, err := createTermFile(podDir, "app")
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 1<<20) + strings.Repeat("y", MaxTerminationMessageLength)
	if err := os.WriteFile(path, []byte(long), 0o666); err != nil {
		t.Fatal(err)
	}
	tf, _ := ownTermFile(podDir, "app", path)
	if b, err := tf.read(MaxTerminationMessageLength); err != nil || string(b) != long[1<<20:] {
		t.Errorf("read %d bytes, %v; want the last %d", len(b), err, MaxTerminationMessageLength)
	}
}
