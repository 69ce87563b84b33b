package atomic

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

func TestDoesNotFollowSymlinksOut(t *testing.T) {
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	dir := filepath.Join(base, "vol")
	for _, d := range []string{outside, dir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(outside, "key")
	if err := os.WriteFile(secret, []byte("untouched"), 0o600); err != nil {
		t.Fatal(err)
	}

	// ..data and a user-visible link pointing out of the volume.
	if err := os.Symlink("../outside", filepath.Join(dir, dataDirName)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "key")); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, dir, map[string]File{"key": file("new", 0o644)})

	if got := readString(t, secret); got != "untouched" {
		t.Errorf("the file outside was changed to %q", got)
	}
	if got := readString(t, filepath.Join(dir, "key")); got != "new" {
		t.Errorf("key = %q", got)
	}
	if target, _ := os.Readlink(filepath.Join(dir, "key")); target != dataDirName+"/key" {
		t.Errorf("key -> %q", target)
	}
	dataDir(t, dir)
	if got := entries(t, outside); len(got) != 1 {
		t.Errorf("outside now holds %v", got)
	}
}

func TestRefusesToReplaceRealFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "key"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(dir, map[string]File{"key": file("new", 0o644)}); err == nil {
		t.Fatal("Write replaced a regular file")
	}
	if got := readString(t, filepath.Join(dir, "key")); got != "mine" {
		t.Errorf("key = %q", got)
	}
}

func TestOwnership(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown")
	}
	dir := t.TempDir()
	files := map[string]File{
		"token":   {Data: []byte("t"), Mode: 0o600, FsUser: int64p(1234), FsGroup: int64p(5678)},
		"sub/cfg": {Data: []byte("c"), Mode: 0o644, FsGroup: int64p(5678)},
	}
	mustWrite(t, dir, files)

	check := func(name string, uid, gid uint32, mode os.FileMode) {
		t.Helper()
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != uid || st.Gid != gid || fi.Mode() != mode {
			t.Errorf("%s: uid %d gid %d mode %v; want %d %d %v", name, st.Uid, st.Gid, fi.Mode(), uid, gid, mode)
		}
	}
	// fsGroup adds group read: 0600 becomes 0640, as upstream's ownership
	// change does for service account tokens.
	check("token", 1234, 5678, 0o640)
	check("sub/cfg", 0, 5678, 0o644)
	check("sub", 0, 5678, os.ModeDir|os.ModeSetgid|0o755)

	ts := dataDir(t, dir)
	mustWrite(t, dir, files)
	if dataDir(t, dir) != ts {
		t.Error("unchanged owners made a new version")
	}
	files["sub/cfg"] = File{Data: []byte("c"), Mode: 0o644, FsGroup: int64p(91)}
	mustWrite(t, dir, files)
	if dataDir(t, dir) == ts {
		t.Error("a group change did not make a new version")
	}
}

// TestConcurrentReaders checks what the layout exists for: a reader of a
// key that stays in the payload never sees it missing or half-written,
// whatever the writer does.
func TestConcurrentReaders(t *testing.T) {
	dir := t.TempDir()
	content := func(i int) string {
		// Varying lengths, and self-describing so a mix is detectable.
		return fmt.Sprintf("v%d:%s:end", i, strings.Repeat(fmt.Sprint(i%10), 100+i%4000))
	}
	valid := func(s string) bool {
		var i int
		if _, err := fmt.Sscanf(s, "v%d:", &i); err != nil {
			return false
		}
		return s == content(i)
	}
	mustWrite(t, dir, map[string]File{"key": file(content(0), 0o644)})

	const updates = 60
	var stop atomic.Bool
	var reads, bad atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				b, err := os.ReadFile(filepath.Join(dir, "key"))
				reads.Add(1)
				if err != nil || !valid(string(b)) {
					bad.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("err=%v len=%d", err, len(b)))
				}
			}
		}()
	}
	for i := 1; i <= updates; i++ {
		files := map[string]File{"key": file(content(i), 0o644)}
		// Other keys come and go around the one being read.
		if i%2 == 0 {
			files["extra"] = file("x", 0o644)
			files["dir/nested"] = file(content(i), 0o600)
		}
		mustWrite(t, dir, files)
	}
	stop.Store(true)
	wg.Wait()

	if bad.Load() > 0 {
		t.Fatalf("%d of %d reads saw a missing or partial file (first: %v)", bad.Load(), reads.Load(), firstErr.Load())
	}
	if got := readString(t, filepath.Join(dir, "key")); got != content(updates) {
		t.Errorf("final key has the wrong content")
	}
	if reads.Load() < 10 {
		t.Logf("only %d reads ran", reads.Load())
	}
}
