package rshared

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/skiff-sh/skiff/internal/volume/mountinfo"
)

// mountsAt counts the mounts whose mount point is dir.
func mountsAt(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	for _, mp := range mountinfo.Under(dir) {
		if mp == dir {
			n++
		}
	}
	return n
}

// tmpfs mounts a tmpfs of the test's own, with the given propagation,
// unmounted (with what is below it) when the test ends.
func tmpfs(t *testing.T, propagation uintptr) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		if errors.Is(err, unix.EPERM) {
			t.Skipf("cannot mount here: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	if err := unix.Mount("", dir, "", propagation, ""); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A directory on a private mount becomes a shared bind mount of itself;
// made again (a restarted Skiff), nothing is stacked on it; a mount made
// below it afterwards is shared too, so it propagates to peers.
func TestMakeBindsAPrivateDirectoryShared(t *testing.T) {
	// Whatever the host's / is, the directory starts on a mount that is
	// not shared.
	base := tmpfs(t, unix.MS_PRIVATE)
	root := filepath.Join(base, "root")
	if err := os.Mkdir(root, 0o750); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(root, link); err != nil {
		t.Fatal(err)
	}

	if err := Make(link); err != nil { // through a symlink, as --root-dir may be
		t.Fatal(err)
	}
	m, err := mountinfo.Containing(root)
	if err != nil {
		t.Fatal(err)
	}
	if m.Point != root || !m.Shared {
		t.Fatalf("after Make the root is on %+v, want a shared mount at %s", m, root)
	}
	if err := Make(root); err != nil {
		t.Fatal(err)
	}
	if n := mountsAt(t, root); n != 1 {
		t.Errorf("%d mounts at the root after a second Make, want 1", n)
	}
	sub := filepath.Join(root, "pods")
	if err := os.Mkdir(sub, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", sub, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	if m, err := mountinfo.Containing(sub); err != nil || m.Point != sub || !m.Shared {
		t.Errorf("a mount under the shared root: %+v, %v; want shared (rshared)", m, err)
	}
}

// A directory already on a shared mount is left as it is.
func TestMakeLeavesASharedMountAlone(t *testing.T) {
	root := filepath.Join(tmpfs(t, unix.MS_SHARED), "root")
	if err := os.Mkdir(root, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := Make(root); err != nil {
		t.Fatal(err)
	}
	if n := mountsAt(t, root); n != 0 {
		t.Errorf("%d mounts at a root already on a shared mount, want none", n)
	}
}

func TestMakeMissingDirectory(t *testing.T) {
	if err := Make(filepath.Join(t.TempDir(), "absent")); err == nil {
		t.Error("Make of a missing directory succeeded")
	}
}
