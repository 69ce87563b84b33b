package du

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// A tree below base is measured through held fds; a directory on the way
// swapped for a symlink to a host directory fails the walk instead of
// measuring the host's files, and a missing one is fs.ErrNotExist.
func TestDirBeneath(t *testing.T) {
	base, host := t.TempDir(), t.TempDir()
	vol := filepath.Join(base, "pods", "uid", "volumes", "kubernetes.io~empty-dir", "data")
	must(t, os.MkdirAll(vol, 0o750))
	must(t, os.WriteFile(filepath.Join(vol, "f"), make([]byte, 64<<10), 0o600))
	rel := "pods/uid/volumes/kubernetes.io~empty-dir/data"
	got, err := DirBeneath(context.Background(), base, rel)
	if err != nil || got.Bytes < 64<<10 || got.Inodes != 2 {
		t.Fatalf("DirBeneath = %+v, %v; want the 64 KiB file and its directory", got, err)
	}

	// The host directory holds a bigger tree at the same relative place.
	must(t, os.MkdirAll(filepath.Join(host, "kubernetes.io~empty-dir", "data"), 0o750))
	must(t, os.WriteFile(filepath.Join(host, "kubernetes.io~empty-dir", "data", "big"), make([]byte, 1<<20), 0o600))
	volumes := filepath.Join(base, "pods", "uid", "volumes")
	must(t, os.Rename(volumes, volumes+".real"))
	must(t, os.Symlink(host, volumes))
	if got, err := DirBeneath(context.Background(), base, rel); err == nil || got.Bytes != 0 {
		t.Errorf("through a symlink on the way: %+v, %v; want an error and nothing counted", got, err)
	}
	if _, err := DirBeneath(context.Background(), base, "pods/gone/volumes"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing directory: %v, want fs.ErrNotExist", err)
	}
	if _, err := OpenBeneath(base, "../x"); err == nil {
		t.Error("a path out of base was opened")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
