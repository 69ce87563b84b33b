package volume

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/skiff-sh/skiff/internal/volume/mountinfo"
)

// mountTestTmpfs mounts a small tmpfs on dir until the test ends.
func mountTestTmpfs(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		if errors.Is(err, unix.EPERM) {
			t.Skipf("cannot mount here: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
}

func mounted(dir string) bool {
	for _, mp := range mountinfo.Under(dir) {
		if mp == dir {
			return true
		}
	}
	return false
}

// A volume's mount below the pods directory is unmounted through the
// walk; a missing path or a plain directory is no error.
func TestUnmountBeneath(t *testing.T) {
	base := t.TempDir()
	mp := filepath.Join(base, "uid", "volumes", "kubernetes.io~csi", "v", "mount")
	mountTestTmpfs(t, mp)
	if err := unmountBeneath(base, mp); err != nil {
		t.Fatal(err)
	}
	if mounted(mp) {
		t.Errorf("%s still mounted", mp)
	}
	for _, p := range []string{mp, filepath.Join(base, "uid", "gone")} {
		if err := unmountBeneath(base, p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if err := unmountBeneath(base, filepath.Dir(base)); err == nil {
		t.Error("a path outside base was taken")
	}
}

// A directory on the way swapped for a symlink to a host directory that
// holds a mount at the same relative place: the host mount stays, and the
// unmount is refused. Unmounting by path (UMOUNT_NOFOLLOW guards only the
// last element) removes the host's mount.
func TestUnmountBeneathRefusesASymlinkOnTheWay(t *testing.T) {
	base, host := t.TempDir(), t.TempDir()
	hostMount := filepath.Join(host, "v", "mount")
	mountTestTmpfs(t, hostMount)
	pluginDir := filepath.Join(base, "uid", "volumes", "kubernetes.io~csi")
	if err := os.MkdirAll(filepath.Dir(pluginDir), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(host, pluginDir); err != nil {
		t.Fatal(err)
	}
	mp := filepath.Join(pluginDir, "v", "mount")
	if err := unmountBeneath(base, mp); err == nil {
		t.Error("the unmount through a symlink was not refused")
	}
	if !mounted(hostMount) {
		t.Fatalf("the host's mount %s was unmounted through the symlink", hostMount)
	}
	// The last element a symlink: not followed (no mount point there, so
	// nothing to unmount).
	if err := os.Remove(pluginDir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(pluginDir, "v"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(hostMount, mp); err != nil {
		t.Fatal(err)
	}
	_ = unmountBeneath(base, mp)
	if !mounted(hostMount) {
		t.Fatalf("the host's mount %s was unmounted through a final symlink", hostMount)
	}
}
