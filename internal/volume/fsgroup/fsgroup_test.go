package fsgroup

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// applyTo runs Apply on the directory dir.
func applyTo(t *testing.T, dir string, o Options) error {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	must(t, err)
	defer unix.Close(fd)
	return Apply(context.Background(), fd, o)
}

func statOf(t *testing.T, p string) unix.Stat_t {
	t.Helper()
	var st unix.Stat_t
	must(t, unix.Lstat(p, &st))
	return st
}

// snapshot lists a host tree: names, types, modes, owners, sizes.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	must(t, filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		st := statOf(t, p)
		lines = append(lines, fmt.Sprintf("%s %o %d:%d %d", strings.TrimPrefix(p, dir), st.Mode, st.Uid, st.Gid, st.Size))
		return nil
	}))
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// hostDir is a directory standing for the host: a file of mode 0600 and
// group 0 in it.
func hostDir(t *testing.T) (dir, file string) {
	dir = t.TempDir()
	file = filepath.Join(dir, "secret")
	must(t, os.WriteFile(file, []byte("host"), 0o600))
	must(t, os.Chmod(dir, 0o700))
	return dir, file
}

func TestApplyGivesTheTreeTheGroupAndNeverFollowsSymlinks(t *testing.T) {
	vol := t.TempDir()
	host, secret := hostDir(t)
	before := snapshot(t, host)
	must(t, os.Chmod(vol, 0o700))
	must(t, os.MkdirAll(filepath.Join(vol, "a/b"), 0o700))
	must(t, os.WriteFile(filepath.Join(vol, "a/b/f"), []byte("x"), 0o600))
	must(t, os.Symlink(secret, filepath.Join(vol, "a/to-file")))
	must(t, os.Symlink(host, filepath.Join(vol, "to-dir")))
	must(t, unix.Mkfifo(filepath.Join(vol, "fifo"), 0o600))
	must(t, applyTo(t, vol, Options{GID: 4321}))

	for p, want := range map[string]uint32{
		".": unix.S_IFDIR | unix.S_ISGID | 0o770, "a": unix.S_IFDIR | unix.S_ISGID | 0o770,
		"a/b": unix.S_IFDIR | unix.S_ISGID | 0o770, "a/b/f": unix.S_IFREG | 0o660, "fifo": unix.S_IFIFO | 0o660,
	} {
		st := statOf(t, filepath.Join(vol, p))
		if st.Gid != 4321 || st.Mode&0o7777 != want&0o7777 || st.Mode&unix.S_IFMT != want&unix.S_IFMT {
			t.Errorf("%s: gid %d mode %o, want 4321 %o", p, st.Gid, st.Mode, want)
		}
	}
	for _, link := range []string{"a/to-file", "to-dir"} {
		if st := statOf(t, filepath.Join(vol, link)); st.Gid != 4321 {
			t.Errorf("symlink %s itself has gid %d", link, st.Gid)
		}
	}
	if now := snapshot(t, host); now != before {
		t.Errorf("a symlink's target changed:\n%s\nnow:\n%s", before, now)
	}
}

func TestOnRootMismatchSkipsAVolumeThatHasTheGroup(t *testing.T) {
	vol := t.TempDir()
	f := filepath.Join(vol, "f")
	must(t, os.WriteFile(f, []byte("x"), 0o600))
	onRoot := v1.FSGroupChangeOnRootMismatch
	must(t, os.Chown(vol, -1, 55))
	must(t, os.Chmod(vol, os.ModeSetgid|0o770))
	must(t, applyTo(t, vol, Options{GID: 55, Policy: &onRoot}))
	if st := statOf(t, f); st.Gid == 55 || st.Mode&0o777 != 0o600 {
		t.Errorf("OnRootMismatch walked a volume whose root matched: %d %o", st.Gid, st.Mode)
	}
	// Without setgid on the root, it walks.
	must(t, os.Chmod(vol, 0o770))
	must(t, applyTo(t, vol, Options{GID: 55, Policy: &onRoot}))
	if st := statOf(t, f); st.Gid != 55 || st.Mode&0o777 != 0o660 {
		t.Errorf("OnRootMismatch did not walk a root without setgid: %d %o", st.Gid, st.Mode)
	}
	always := v1.FSGroupChangeAlways
	must(t, os.Chown(f, -1, 0))
	must(t, applyTo(t, vol, Options{GID: 55, Policy: &always, ReadOnly: true}))
	if st := statOf(t, f); st.Gid != 55 || st.Mode&0o777 != 0o660 {
		t.Errorf("Always did not walk: %d %o", st.Gid, st.Mode)
	}
}

// What is mounted inside the volume is another volume, or the host's:
// it is neither entered nor changed.
func TestApplyDoesNotCrossMounts(t *testing.T) {
	vol := t.TempDir()
	host, _ := hostDir(t)
	before := snapshot(t, host)
	mnt := filepath.Join(vol, "mnt")
	must(t, os.Mkdir(mnt, 0o700))
	must(t, unix.Mount(host, mnt, "", unix.MS_BIND, ""))
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	must(t, applyTo(t, vol, Options{GID: 99}))
	must(t, unix.Unmount(mnt, 0))
	if now := snapshot(t, host); now != before {
		t.Errorf("a bind mount's content changed:\n%s\nnow:\n%s", before, now)
	}
}

// A pod swaps a directory of its volume for a symlink to a host directory
// (renameat2 RENAME_EXCHANGE) as fast as it can while the group is
// applied, again and again: the host directory never changes.
func TestApplyRacingSymlinkSwaps(t *testing.T) {
	vol := t.TempDir()
	host, _ := hostDir(t)
	before := snapshot(t, host)
	sub, link := filepath.Join(vol, "sub"), filepath.Join(vol, "link")
	must(t, os.Mkdir(sub, 0o700))
	for i := range 50 {
		must(t, os.WriteFile(filepath.Join(sub, fmt.Sprint("f", i)), nil, 0o600))
	}
	must(t, os.Symlink(host, link))
	stop, stopped := make(chan struct{}), make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				stopped <- n
				return
			default:
			}
			if unix.Renameat2(unix.AT_FDCWD, sub, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE) == nil {
				n++
			}
		}
	}()
	for i := range 300 {
		must(t, applyTo(t, vol, Options{GID: int64(1000 + i%2)}))
	}
	close(stop)
	if n := <-stopped; n == 0 {
		t.Fatal("no swap happened")
	}
	if now := snapshot(t, host); now != before {
		t.Errorf("the host directory changed:\n%s\nnow:\n%s", before, now)
	}
}

// A tree deeper than MaxDepth is an error, not a walk that holds an fd
// per level without end.
func TestApplyRefusesATreeTooDeep(t *testing.T) {
	vol := t.TempDir()
	fd, err := unix.Open(vol, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	must(t, err)
	for range MaxDepth + 2 {
		must(t, unix.Mkdirat(fd, "d", 0o700))
		next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		must(t, err)
		unix.Close(fd)
		fd = next
	}
	unix.Close(fd)
	if err := applyTo(t, vol, Options{GID: 7}); err == nil {
		t.Error("no error for a tree deeper than MaxDepth")
	}
	t.Cleanup(func() { _ = os.RemoveAll(vol) })
}
