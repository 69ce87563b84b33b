package atomic

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

func TestFirstWriteLayout(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, dir, map[string]File{
		"key":     file("value", 0o644),
		"other":   file("x", 0o600),
		"sub/one": file("1", 0o644),
	})

	ts := dataDir(t, dir)
	want := []string{ts, dataDirName, "key", "other", "sub"}
	slices.Sort(want)
	if got := entries(t, dir); !slices.Equal(got, want) {
		t.Fatalf("entries = %v, want %v", got, want)
	}
	for _, name := range []string{"key", "other", "sub"} {
		target, err := os.Readlink(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("%s is not a symlink: %v", name, err)
		}
		if want := dataDirName + "/" + name; target != want {
			t.Errorf("%s -> %q, want %q", name, target, want)
		}
	}
	if got := readString(t, filepath.Join(dir, "key")); got != "value" {
		t.Errorf("key = %q", got)
	}
	if got := readString(t, filepath.Join(dir, "sub/one")); got != "1" {
		t.Errorf("sub/one = %q", got)
	}
	fi, err := os.Stat(filepath.Join(dir, ts))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o755 {
		t.Errorf("data dir mode = %v, want 0755", fi.Mode().Perm())
	}
}

func TestUpdateSwapsAtomically(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, dir, map[string]File{"key": file("old", 0o644)})
	oldTs := dataDir(t, dir)

	// A reader that opened the old version keeps reading it.
	held, err := os.Open(filepath.Join(dir, "key"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()

	swapped := false
	beforeSwap = func(newTs string) {
		// The new version is complete, but readers still see the old one.
		if got := readString(t, filepath.Join(dir, "key")); got != "old" {
			t.Errorf("before the swap key = %q, want old", got)
		}
		if got := readString(t, filepath.Join(dir, newTs, "key")); got != "new" {
			t.Errorf("new version key = %q, want new", got)
		}
		swapped = true
	}
	t.Cleanup(func() { beforeSwap = nil })
	mustWrite(t, dir, map[string]File{"key": file("new", 0o644)})
	if !swapped {
		t.Fatal("the new version was not written")
	}

	if got := readString(t, filepath.Join(dir, "key")); got != "new" {
		t.Errorf("after the swap key = %q, want new", got)
	}
	if ts := dataDir(t, dir); ts == oldTs {
		t.Errorf("..data still points to %s", ts)
	}
	if _, err := os.Lstat(filepath.Join(dir, oldTs)); !os.IsNotExist(err) {
		t.Errorf("old data dir still there: %v", err)
	}
	b, err := io.ReadAll(held)
	if err != nil || string(b) != "old" {
		t.Errorf("held reader got %q, %v; want old", b, err)
	}
}

func TestRemoveKey(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, dir, map[string]File{"a": file("1", 0o644), "b": file("2", 0o644)})
	first := dataDir(t, dir)
	mustWrite(t, dir, map[string]File{"a": file("1", 0o644)})

	if dataDir(t, dir) == first {
		t.Error("removing a key did not make a new version")
	}
	if _, err := os.Lstat(filepath.Join(dir, "b")); !os.IsNotExist(err) {
		t.Errorf("link b still there: %v", err)
	}
	if got := readString(t, filepath.Join(dir, "a")); got != "1" {
		t.Errorf("a = %q", got)
	}
	want := []string{dataDir(t, dir), dataDirName, "a"}
	slices.Sort(want)
	if got := entries(t, dir); !slices.Equal(got, want) {
		t.Errorf("entries = %v, want %v", got, want)
	}
}

func TestNestedPaths(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, dir, map[string]File{
		"foo/bar":      file("bar", 0o644),
		"foo/baz/blah": file("blah", 0o644),
		"top":          file("top", 0o644),
	})
	for _, name := range []string{"foo", "top"} {
		if fi, err := os.Lstat(filepath.Join(dir, name)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s is not a symlink: %v", name, err)
		}
	}
	if got := readString(t, filepath.Join(dir, "foo/baz/blah")); got != "blah" {
		t.Errorf("foo/baz/blah = %q", got)
	}
	// Only top-level names get links.
	if _, err := os.Lstat(filepath.Join(dir, "bar")); !os.IsNotExist(err) {
		t.Errorf("unexpected link bar: %v", err)
	}

	mustWrite(t, dir, map[string]File{"foo/bar": file("bar2", 0o644)})
	if got := readString(t, filepath.Join(dir, "foo/bar")); got != "bar2" {
		t.Errorf("foo/bar = %q", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "foo/baz")); !os.IsNotExist(err) {
		t.Errorf("foo/baz still there: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "top")); !os.IsNotExist(err) {
		t.Errorf("link top still there: %v", err)
	}
}

func TestModes(t *testing.T) {
	// Modes must not depend on the process umask.
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)

	dir := t.TempDir()
	files := map[string]File{
		"ro":     file("a", 0o400),
		"rw":     file("b", 0o644),
		"exec":   file("c", 0o755),
		"d/n":    file("d", 0o640),
		"masked": file("e", 0o100777), // only the permission bits count
	}
	mustWrite(t, dir, files)
	want := map[string]os.FileMode{"ro": 0o400, "rw": 0o644, "exec": 0o755, "d/n": 0o640, "masked": 0o777}
	for name, mode := range want {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != mode {
			t.Errorf("%s mode = %v, want %v", name, fi.Mode(), mode)
		}
	}
	fi, err := os.Stat(filepath.Join(dir, "d"))
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("directory d mode = %v, %v; want 0755", fi.Mode(), err)
	}

	// A mode change alone makes a new version.
	before := dataDir(t, dir)
	files["rw"] = file("b", 0o600)
	mustWrite(t, dir, files)
	if dataDir(t, dir) == before {
		t.Error("a mode change did not make a new version")
	}
	if fi, _ := os.Stat(filepath.Join(dir, "rw")); fi.Mode() != 0o600 {
		t.Errorf("rw mode = %v, want 0600", fi.Mode())
	}
}

func TestUnchangedIsNoOp(t *testing.T) {
	dir := t.TempDir()
	files := map[string]File{"a": file("1", 0o644), "n/b": file("2", 0o600)}
	mustWrite(t, dir, files)
	first := dataDir(t, dir)
	mustWrite(t, dir, files)
	if got := dataDir(t, dir); got != first {
		t.Errorf("unchanged write made a new version: %s -> %s", first, got)
	}

	// A missing link is restored without a new version.
	if err := os.Remove(filepath.Join(dir, "a")); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, dir, files)
	if got := dataDir(t, dir); got != first {
		t.Errorf("restoring a link made a new version: %s -> %s", first, got)
	}
	if got := readString(t, filepath.Join(dir, "a")); got != "1" {
		t.Errorf("a = %q", got)
	}

	// Same length, other content: a new version.
	files["a"] = file("2", 0o644)
	mustWrite(t, dir, files)
	if dataDir(t, dir) == first {
		t.Error("changed content did not make a new version")
	}
}

func TestEmptyPayload(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, dir, map[string]File{"a": file("1", 0o644)})
	mustWrite(t, dir, nil)
	ts := dataDir(t, dir)
	want := []string{ts, dataDirName}
	slices.Sort(want)
	if got := entries(t, dir); !slices.Equal(got, want) {
		t.Errorf("entries = %v, want %v", got, want)
	}
}

func TestMissingDir(t *testing.T) {
	if err := Write(filepath.Join(t.TempDir(), "nope"), map[string]File{"a": file("1", 0o644)}); err == nil {
		t.Fatal("Write into a missing directory succeeded")
	}
}

func TestOrphansRemoved(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, dir, map[string]File{"a": file("1", 0o644)})
	// Leftovers of a write that died half-way.
	orphan := filepath.Join(dir, "..2020_01_02_03_04_05.42")
	if err := os.MkdirAll(filepath.Join(orphan, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..2020_01_02_03_04_05.42", filepath.Join(dir, newDataDirName)); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, dir, map[string]File{"a": file("2", 0o644)})
	want := []string{dataDir(t, dir), dataDirName, "a"}
	slices.Sort(want)
	if got := entries(t, dir); !slices.Equal(got, want) {
		t.Errorf("entries = %v, want %v", got, want)
	}
}
