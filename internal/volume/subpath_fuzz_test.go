package volume

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// fuzzTree makes a volume with symlinks that stay inside it, lead out of
// it, loop and dangle, beside a directory holding a secret.
func fuzzTree(t *testing.T) (root, vol, outside string) {
	root = t.TempDir()
	vol, outside = filepath.Join(root, "vol"), filepath.Join(root, "outside")
	for _, d := range []string{filepath.Join(vol, "dir", "sub"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, data := range map[string]string{"dir/f": "in", "file": "in", "../outside/secret": "out"} {
		if err := os.WriteFile(filepath.Join(vol, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, to := range map[string]string{
		"in": "dir", "self": ".", "up": "..", "abs": outside, "etc": "/etc", "chain": "in/sub",
		"loop": "loop", "dangling": "nowhere", "dir/back": "../dir", "dir/out": "../../outside",
		"absin": filepath.Join(vol, "dir"),
	} {
		if err := os.Symlink(to, filepath.Join(vol, name)); err != nil {
			t.Fatal(err)
		}
	}
	return root, vol, outside
}

// fdPath is where the kernel says an open descriptor is.
func fdPath(t *testing.T, fd int) string {
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// FuzzSubPath resolves and opens arbitrary subPaths in a volume full of
// symlinks, with openat2 and with the component walk. Both must agree;
// what they open is exactly the path resolveInside proposed, inside the
// volume and never a symlink; and nothing is ever created outside it.
func FuzzSubPath(f *testing.F) {
	for _, s := range []string{"dir", "dir/sub", "in", "self", "file", "new/deeper", "up", "up/outside",
		"abs", "abs/secret", "etc", "chain", "chain/x", "loop", "dangling/x", "dir/back/back/f",
		"dir/out/secret", "absin", "a/./b", "a//b", "../x", "/etc", "x/..", ".", "dir/f/x", "..data"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sub string) {
		root, vol, outside := fuzzTree(t)
		if err := checkSubPath(sub); err != nil {
			if sub != "" && !filepath.IsAbs(sub) && !strings.Contains("/"+sub+"/", "/../") {
				t.Fatalf("subPath %q refused: %v", sub, err)
			}
			return
		}
		rel, err := resolveInside(vol, sub)
		if err != nil {
			return
		}
		if rel != "." && (filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../")) {
			t.Fatalf("subPath %q proposed %q, outside the volume", sub, rel)
		}
		var got [2]unix.Stat_t
		var errs [2]error
		for i, tryOpenat2 := range []bool{true, false} {
			fd, err := openInsideWith(vol, rel, tryOpenat2)
			if errs[i] = err; err != nil {
				continue
			}
			if p := fdPath(t, fd); p != filepath.Join(vol, rel) {
				t.Errorf("subPath %q (openat2 %v): opened %s, want %s", sub, tryOpenat2, p, filepath.Join(vol, rel))
			}
			if err := unix.Fstat(fd, &got[i]); err != nil {
				t.Fatal(err)
			}
			unix.Close(fd)
			if got[i].Mode&unix.S_IFMT == unix.S_IFLNK {
				t.Errorf("subPath %q (openat2 %v): opened a symlink", sub, tryOpenat2)
			}
		}
		if (errs[0] == nil) != (errs[1] == nil) || (errs[0] == nil && got[0].Ino != got[1].Ino) {
			t.Errorf("subPath %q: openat2 and the walk disagree: %v / %v", sub, errs[0], errs[1])
		}
		for dir, want := range map[string]int{root: 2, outside: 1} {
			if entries, _ := os.ReadDir(dir); len(entries) != want {
				t.Fatalf("subPath %q created something outside the volume: %s has %d entries", sub, dir, len(entries))
			}
		}
	})
}
