package du

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestDirCountsHardLinksOnce(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a"), make([]byte, 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(dir, "a"), filepath.Join(dir, "b")); err != nil {
		t.Fatal(err)
	}
	u, err := Dir(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if u.Bytes < 64<<10 || u.Bytes >= 128<<10 {
		t.Errorf("bytes %d, want the 64 KiB file counted once", u.Bytes)
	}
	if u.Inodes != 2 { // the directory and the file
		t.Errorf("inodes %d, want 2", u.Inodes)
	}
}

func TestDirDoesNotFollowSymlinks(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "big"), make([]byte, 256<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	u, err := Dir(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if u.Bytes >= 256<<10 {
		t.Errorf("bytes %d: the walk followed the symlink", u.Bytes)
	}
}

func TestDirMissingRootIsNotExist(t *testing.T) {
	u, err := Dir(context.Background(), filepath.Join(t.TempDir(), "gone"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Dir of a missing root: %v, want an error wrapping fs.ErrNotExist", err)
	}
	if u != (Usage{}) {
		t.Errorf("usage %+v with the error, want zero", u)
	}
}
