package du

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestDirMatchesGNUDu compares a mixed tree's figures with du -x's.
func TestDirMatchesGNUDu(t *testing.T) {
	if _, err := exec.LookPath("du"); err != nil {
		t.Skip("no du to compare with")
	}
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a"), 100<<10)
	mkdir(t, filepath.Join(dir, "x", "y", "z"))
	write(t, filepath.Join(dir, "x", "y", "b"), 3<<10)
	write(t, filepath.Join(dir, "x", "y", "z", "c"), 1)
	if err := os.Link(filepath.Join(dir, "a"), filepath.Join(dir, "x", "hard")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(strings.Repeat("long/", 40), filepath.Join(dir, "x", "slow-symlink")); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("x"), 32<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()

	u, err := Dir(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := gnuDu(t, "-B1", dir); u.Bytes != want {
		t.Errorf("bytes %d, du says %d", u.Bytes, want)
	}
	if want := gnuDu(t, "--inodes", dir); u.Inodes != want {
		t.Errorf("inodes %d, du says %d", u.Inodes, want)
	}
}

func TestDirRootSymlinkIsAnError(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "real", "f"), 64<<10)
	if err := os.Symlink(filepath.Join(dir, "real"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	u, err := Dir(context.Background(), filepath.Join(dir, "link"))
	if err == nil || u != (Usage{}) {
		t.Errorf("Dir of a symlink: %+v, %v; want no usage and an error", u, err)
	}
}

// TestDirDoesNotEnterOtherMounts mounts a tmpfs and binds a directory of
// the same filesystem into the tree: du -x skips the first, and the walk
// skips both, mount points included.
func TestDirDoesNotEnterOtherMounts(t *testing.T) {
	const big = 4 << 20
	outside := t.TempDir()
	write(t, filepath.Join(outside, "big"), big)
	dir := t.TempDir()
	write(t, filepath.Join(dir, "small"), 1)
	mkdir(t, filepath.Join(dir, "tmpfs"))
	mkdir(t, filepath.Join(dir, "deeper", "bind"))
	before, err := Dir(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	mount(t, "none", filepath.Join(dir, "tmpfs"), "tmpfs", 0)
	write(t, filepath.Join(dir, "tmpfs", "big"), big)
	mount(t, outside, filepath.Join(dir, "deeper", "bind"), "", unix.MS_BIND)

	u, err := Dir(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if u.Bytes >= big {
		t.Errorf("bytes %d: the walk entered a mount", u.Bytes)
	}
	if u.Inodes != before.Inodes-2 {
		t.Errorf("inodes %d, want %d: the tree less its two mount points", u.Inodes, before.Inodes-2)
	}
}

// TestDirDeepTreeWithFewFds walks a tree nested far deeper than the fds
// the process may still open: a walk holding one fd per level fails.
func TestDirDeepTreeWithFewFds(t *testing.T) {
	const depth = 300
	dir := t.TempDir()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < depth; i++ {
		if err := unix.Mkdirat(fd, "d", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mkdirat(fd, "leaf", 0o755); err != nil { // a sibling, so each level is left and come back to
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		unix.Close(fd)
		fd = next
	}
	unix.Close(fd)

	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	open := uint64(openFds(t))
	low := lim
	low.Cur = open + 8
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	u, err := Dir(context.Background(), dir)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("walk with %d fds left: %v", low.Cur-open, err)
	}
	if want := uint64(1 + 2*depth); u.Inodes != want {
		t.Errorf("inodes %d, want %d", u.Inodes, want)
	}
}

// TestDirStopsAtTheDeadline: a walk whose context has ended returns what
// it counted so far, less than the tree, with the context's error.
func TestDirStopsAtTheDeadline(t *testing.T) {
	dir := t.TempDir()
	for i := 0; i < 20; i++ {
		write(t, filepath.Join(dir, strconv.Itoa(i), "f"), 8<<10)
	}
	full, err := Dir(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	u, err := Dir(ctx, dir)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("walk past its deadline: %v, want context.DeadlineExceeded", err)
	}
	if u.Inodes >= full.Inodes || u.Bytes >= full.Bytes {
		t.Errorf("usage %+v past the deadline, want part of %+v", u, full)
	}
}

// TestDirFindsItsWayBackAfterAMove races the walk against a directory of
// the tree exchanged with one outside it while the walk is below it. Going
// back up through "..", a walk that does not check where it lands finds
// itself outside the tree, where its parent's other names hold big files.
// Which names are listed first is the filesystem's choice, so there are
// many of each.
func TestDirFindsItsWayBackAfterAMove(t *testing.T) {
	const big = 1 << 20
	tree, outside := t.TempDir(), t.TempDir()
	for _, d := range []string{tree, outside} {
		for i := 0; i < 4; i++ {
			for j := 0; j < 4; j++ {
				mkdir(t, filepath.Join(d, "a", "b"+strconv.Itoa(i), "c"+strconv.Itoa(j), "e"))
			}
		}
	}
	for i := 0; i < 32; i++ { // many, so that some are listed after b
		name := "k" + strconv.Itoa(i)
		mkdir(t, filepath.Join(tree, "a", name))
		write(t, filepath.Join(outside, "a", name, "big"), big)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i = (i + 1) % 4 { // each b in turn: some are listed before a k
			select {
			case <-stop:
				return
			default:
			}
			b := filepath.Join("a", "b"+strconv.Itoa(i))
			if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(tree, b), unix.AT_FDCWD, filepath.Join(outside, b), unix.RENAME_EXCHANGE); err != nil {
				t.Errorf("exchange: %v", err)
				return
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	deadline := time.Now().Add(2 * time.Second)
	walks := 0
	for ; walks < 100000 && time.Now().Before(deadline); walks++ {
		u, err := Dir(context.Background(), tree)
		if err != nil {
			t.Fatalf("walk %d: %v", walks, err)
		}
		if u.Bytes >= big {
			t.Fatalf("walk %d counted %d bytes: it came back up outside the tree", walks, u.Bytes)
		}
	}
	t.Logf("%d walks, none left the tree", walks)
}

func gnuDu(t *testing.T, flag, dir string) uint64 {
	t.Helper()
	out, err := exec.Command("du", "-s", "-x", flag, dir).Output()
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseUint(strings.Fields(string(out))[0], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func mount(t *testing.T, source, target, fstype string, flags uintptr) {
	t.Helper()
	if err := unix.Mount(source, target, fstype, flags, ""); err != nil {
		if errors.Is(err, unix.EPERM) {
			t.Skipf("cannot mount here: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(target, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", target, err)
		}
	})
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, path string, n int) {
	t.Helper()
	mkdir(t, filepath.Dir(path))
	if err := os.WriteFile(path, randomBytes(n), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestWalkerResumesWhereTheTreeStillIs moves two directories under a walk
// that stands three levels down, and brings it back up: ".." no longer
// leads to the directory it left, nor does its name from the root, so the
// walk resumes at the nearest directory that is still where it was, with
// no fd left behind.
func TestWalkerResumesWhereTheTreeStillIs(t *testing.T) {
	tree := t.TempDir()
	mkdir(t, filepath.Join(tree, "a", "b", "c", "d"))
	mkdir(t, filepath.Join(tree, "a", "k"))
	before := openFds(t)
	root, err := unix.Open(tree, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	w := newWalker(context.Background(), root)
	id, err := w.start()
	if err != nil {
		t.Fatal(err)
	}
	w.stack = []frame{{id: id}}
	for _, name := range []string{"a", "b", "c"} {
		if err := w.down(name); err != nil {
			t.Fatal(err)
		}
		top := &w.stack[len(w.stack)-1]
		top.subdirs = nil // walked by hand here
		if name == "a" {
			top.subdirs = []string{"k"}
		}
	}
	if len(w.stack) != 4 {
		t.Fatalf("walk %d deep, want 4", len(w.stack))
	}
	rename(t, filepath.Join(tree, "a", "b", "c"), filepath.Join(tree, "c"))
	rename(t, filepath.Join(tree, "a", "b"), filepath.Join(tree, "a", "moved"))

	w.stack = w.stack[:3]
	if err := w.up(); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(tree, "a"), &st); err != nil {
		t.Fatal(err)
	}
	var cur unix.Stat_t
	if err := unix.Fstat(w.cur, &cur); err != nil {
		t.Fatal(err)
	}
	if len(w.stack) != 2 || cur.Ino != st.Ino {
		t.Errorf("walk %d deep in inode %d, want 2 deep in a (inode %d)", len(w.stack), cur.Ino, st.Ino)
	}
	if got := w.stack[1].subdirs; len(got) != 1 || got[0] != "k" {
		t.Errorf("a has %q left to walk, want [k]", got)
	}
	w.close()
	if after := openFds(t); after != before {
		t.Errorf("%d fds open after the walk, %d before", after, before)
	}
}

func openFds(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

func rename(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}
