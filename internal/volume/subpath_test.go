package volume

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// bothWays runs f with openat2 and with the component walk that replaces
// it on kernels without it.
func bothWays(t *testing.T, f func(t *testing.T)) {
	t.Run("openat2", func(t *testing.T) {
		if noOpenat2.Load() {
			t.Skip("this kernel has no openat2")
		}
		f(t)
	})
	t.Run("walk", func(t *testing.T) {
		was := noOpenat2.Load()
		noOpenat2.Store(true)
		t.Cleanup(func() { noOpenat2.Store(was) })
		f(t)
	})
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("bind mounts need root")
	}
}

func sameFile(t *testing.T, a, b string) bool {
	t.Helper()
	var sa, sb unix.Stat_t
	if err := unix.Stat(a, &sa); err != nil {
		t.Fatalf("stat %s: %v", a, err)
	}
	if err := unix.Stat(b, &sb); err != nil {
		t.Fatalf("stat %s: %v", b, err)
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

func mountCount(t *testing.T, target string) int {
	t.Helper()
	n := 0
	for _, mp := range mountsUnder(target) {
		if mp == target {
			n++
		}
	}
	return n
}

func TestBindSubPath(t *testing.T) {
	needRoot(t)
	bothWays(t, func(t *testing.T) {
		root := t.TempDir()
		vol := filepath.Join(root, "vol")
		outside := filepath.Join(root, "secret")
		for _, d := range []string{vol, outside, filepath.Join(vol, "dir")} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(vol, 0o777); err != nil {
			t.Fatal(err)
		}
		must := func(err error) {
			if err != nil {
				t.Fatal(err)
			}
		}
		must(os.WriteFile(filepath.Join(vol, "file"), []byte("x"), 0o644))
		must(os.Symlink(outside, filepath.Join(vol, "escape")))
		must(os.Symlink("/etc", filepath.Join(vol, "etc")))
		must(os.Symlink("dir", filepath.Join(vol, "inside")))
		must(os.Symlink(".", filepath.Join(vol, "self")))
		must(os.Symlink("nowhere", filepath.Join(vol, "dangling")))
		target := filepath.Join(root, "pod", subPathsDir, "v", "c", "0")
		t.Cleanup(func() { _ = unmountAll(target) })
		m := Mounted{HostPath: vol}
		for _, c := range []struct {
			sub, want, err string
		}{
			{"dir", "dir", ""},
			{"inside", "dir", ""},
			{"self", ".", ""},
			{"file", "file", ""},
			{"new/deeper", "new/deeper", ""},
			{"dir/./made", "dir/made", ""},
			{"../secret", "", "'..'"},
			{"dir/../../secret", "", "'..'"},
			{"/etc", "", "relative"},
			{"escape", "", "outside the volume"},
			{"etc", "", "outside the volume"},
			{"escape/x", "", "outside the volume"},
			{"dangling/x", "", "no such file"},
			{"file/x", "", "not a directory"},
		} {
			got, err := BindSubPath(m, c.sub, target)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Errorf("subPath %q: err %v, want %q", c.sub, err, c.err)
				}
				continue
			}
			if err != nil || got != target {
				t.Errorf("subPath %q: %q, %v; want %q", c.sub, got, err, target)
				continue
			}
			if !sameFile(t, target, filepath.Join(vol, c.want)) {
				t.Errorf("subPath %q: %s does not show %s", c.sub, target, c.want)
			}
			if n := mountCount(t, target); n != 1 {
				t.Errorf("subPath %q: %d mounts stacked on %s, want the one", c.sub, n, target)
			}
		}
		if fi, err := os.Stat(filepath.Join(vol, "new", "deeper")); err != nil || fi.Mode().Perm() != 0o777 {
			t.Errorf("a created subPath directory must have the volume's mode 0777 whatever the umask: %v, %v", fi, err)
		}
		if entries, _ := os.ReadDir(outside); len(entries) != 0 {
			t.Errorf("a refused subPath created %v outside the volume", entries)
		}
	})
}

// A pod's teardown unmounts its subPath mounts before it removes the pod's
// directory, and leaves the volume's own data (a hostPath) alone.
func TestTearDownUnmountsSubPaths(t *testing.T) {
	needRoot(t)
	host := t.TempDir()
	if err := os.MkdirAll(filepath.Join(host, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	keep := filepath.Join(host, "data", "keep")
	if err := os.WriteFile(keep, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := New(Config{RootDir: t.TempDir()})
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID("u1")}, Spec: v1.PodSpec{Volumes: []v1.Volume{
		{Name: "h", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: host}}},
		{Name: "e", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}},
	}}}
	vols, err := m.SetUp(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"h", "e"} {
		target := SubPathTarget(m.PodDir(pod.UID), name, "c", i)
		t.Cleanup(func() { _ = unmountAll(target) })
		if _, err := BindSubPath(vols[name], "data", target); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.TearDown(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
	if mps := mountsUnder(m.PodDir(pod.UID)); len(mps) != 0 {
		t.Errorf("still mounted after teardown: %v", mps)
	}
	if _, err := os.Stat(m.PodDir(pod.UID)); !os.IsNotExist(err) {
		t.Errorf("pod directory left behind: %v", err)
	}
	if b, err := os.ReadFile(keep); err != nil || string(b) != "mine" {
		t.Errorf("teardown touched the hostPath's data through its subPath mount: %q, %v", b, err)
	}
}
