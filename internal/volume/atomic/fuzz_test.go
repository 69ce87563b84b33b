package atomic

import (
	"bytes"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzWrite writes a payload with arbitrary paths, then replaces it with
// another. Whatever the paths: a write that succeeds shows every file with
// its content and nothing of the previous payload that the new one lacks;
// a write that fails leaves the previous payload readable as it was; and
// nothing is ever written, or linked to, outside the volume directory.
func FuzzWrite(f *testing.F) {
	for _, s := range [][3]string{
		{"a", "b", "c"}, {"a/b", "a/c", "d"}, {"a", "a/b", "x"}, {"./a", "a", "b"},
		{"..data", "x", "y"}, {"../x", "a", "b"}, {"/etc/x", "a", "b"}, {"a/../../x", "a", "b"},
		{"..a", "a..", "..."}, {"a//b", "a/b/", "c"}, {".", "a", "b"}, {"..data_tmp/x", "a", "b"},
	} {
		f.Add(s[0], s[1], s[2], []byte("one"))
	}
	f.Fuzz(func(t *testing.T, a, b, c string, data []byte) {
		parent := t.TempDir()
		dir := filepath.Join(parent, "vol")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		first := map[string]File{a: {Data: data, Mode: 0o644}, "keep": {Data: []byte("k"), Mode: 0o600}}
		second := map[string]File{b: {Data: append([]byte("2"), data...), Mode: 0o644}, c: {Data: []byte("c"), Mode: 0o640}}
		wrote := Write(dir, first) == nil
		if wrote {
			checkPayload(t, dir, first)
		}
		if err := Write(dir, second); err == nil {
			checkPayload(t, dir, second)
			if wrote {
				checkGone(t, dir, first, second)
			}
		} else if wrote {
			checkPayload(t, dir, first) // a failed update changes nothing
		}
		checkContained(t, parent, dir)
	})
}

// checkPayload reads every file of the payload through the volume.
func checkPayload(t *testing.T, dir string, files map[string]File) {
	t.Helper()
	for p, f := range files {
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(path.Clean(p))))
		if err != nil || !bytes.Equal(got, f.Data) {
			t.Fatalf("%q reads %q, %v; want %q", p, got, err, f.Data)
		}
	}
}

// checkGone checks that the paths of old that new lacks are gone.
func checkGone(t *testing.T, dir string, old, new map[string]File) {
	t.Helper()
	kept := map[string]bool{}
	for p := range new {
		// A kept file keeps its directories.
		for c := path.Clean(p); c != "."; c = path.Dir(c) {
			kept[c] = true
		}
	}
	for p := range old {
		if c := path.Clean(p); !kept[c] {
			if _, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(c))); err == nil {
				t.Errorf("%q of the previous payload is still there", p)
			}
		}
	}
}

// checkContained checks that dir is all parent holds and that every
// symlink in dir resolves inside it.
func checkContained(t *testing.T, parent, dir string) {
	t.Helper()
	if es, _ := os.ReadDir(parent); len(es) != 1 {
		t.Fatalf("written outside the volume: %s holds %d entries", parent, len(es))
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink == 0 {
			return err
		}
		target, err := filepath.EvalSymlinks(p)
		if err == nil && target != dir && !strings.HasPrefix(target, dir+"/") {
			t.Errorf("%s links out of the volume to %s", p, target)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
