// Package du measures what a directory tree takes on disk, as du -x counts
// it. The stats summary (volumes, logs) and local-storage eviction
// (emptyDir sizeLimit) use it, so both see the same figure for a tree.
//
// The trees it measures belong to pods, which may change them while the
// walk runs: swap a directory for a symlink, move directories about, or
// nest them deeper than any path can name. So the walk never resolves a
// path inside the tree. It holds the root's fd, opens each directory
// relative to its parent's fd with O_NOFOLLOW, and stats each entry
// relative to its directory's fd without following it. Whatever is
// swapped in is seen for what it is, a symlink, and counted as one.
package du

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Usage is what a directory tree takes on disk.
type Usage struct {
	// Bytes are the allocated blocks (512 bytes each), not file sizes: a
	// sparse file counts what it holds, a tmpfs what it uses.
	Bytes uint64
	// Inodes counts the tree's files, directories and links, a hard-linked
	// file once.
	Inodes uint64
}

// Dir walks dir as du -x does: allocated blocks, hard links counted once,
// symlinks never followed, and nothing on another mount counted or entered,
// not even a bind mount of the same filesystem.
//
// dir itself is opened with O_NOFOLLOW: its own path is the caller's to
// trust, what lies below it is not. A missing dir is an error wrapping
// fs.ErrNotExist: a tree that is not there is not an empty one, and the
// caller decides what that means.
//
// Entries removed or replaced while the walk runs are skipped, so a tree
// that changes under the walk is counted as far as it can be read. When
// ctx ends or a read fails, Dir returns what it counted so far with the
// error: a lower bound of the tree's usage. The walk holds two fds at most,
// however deep the tree.
func Dir(ctx context.Context, dir string) (Usage, error) {
	var fd int
	err := retry(func() (err error) {
		fd, err = unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return Usage{}, fmt.Errorf("disk usage of %s: %w", dir, err)
	}
	u, err := walkFD(ctx, fd)
	if err != nil {
		return u, fmt.Errorf("disk usage of %s: %w", dir, err)
	}
	return u, nil
}

// walkFD walks the directory open at fd, which it closes.
func walkFD(ctx context.Context, fd int) (Usage, error) {
	w := newWalker(ctx, fd)
	defer w.close()
	err := w.run()
	return w.u, err
}

// fileID names a file for as long as it exists.
type fileID struct{ dev, ino uint64 }

// frame is a directory on the way from the root to the one being walked.
type frame struct {
	name    string // its name in its parent; "" for the root
	id      fileID
	subdirs []string // its subdirectories still to walk
}

// walker is one walk. It holds root for the whole walk and cur, the
// directory on top of stack, which may be root; no other fd stays open.
type walker struct {
	ctx       context.Context
	root, cur int
	dev       uint64 // the root's device,
	mnt       uint64 // and mount when the kernel tells it (mntKnown)
	mntKnown  bool
	stack     []frame
	seen      map[uint64]struct{} // directories and hard-linked files counted, by inode
	buf       []byte
	u         Usage
}

// newWalker returns a walk of the directory root, which it owns.
func newWalker(ctx context.Context, root int) *walker {
	return &walker{ctx: ctx, root: root, cur: root, seen: map[uint64]struct{}{}, buf: make([]byte, 16<<10)}
}

// start counts the root and learns its device and mount.
func (w *walker) start() (fileID, error) {
	st, err := statAt(w.root, "", unix.AT_EMPTY_PATH)
	if err != nil {
		return fileID{}, err
	}
	w.dev, w.mnt = devOf(&st), st.Mnt_id
	w.mntKnown = st.Mask&unix.STATX_MNT_ID != 0
	w.counted(st.Ino)
	w.count(&st)
	return idOf(&st), nil
}

func (w *walker) run() error {
	id, err := w.start()
	if err != nil {
		return err
	}
	subdirs, err := w.scan(w.root)
	if err != nil {
		return err
	}
	w.stack = []frame{{id: id, subdirs: subdirs}}
	for len(w.stack) > 0 {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		top := &w.stack[len(w.stack)-1]
		if len(top.subdirs) == 0 {
			w.stack = w.stack[:len(w.stack)-1]
			if len(w.stack) > 0 {
				if err := w.up(); err != nil {
					return err
				}
			}
			continue
		}
		name := top.subdirs[len(top.subdirs)-1]
		top.subdirs = top.subdirs[:len(top.subdirs)-1]
		if err := w.down(name); err != nil {
			return err
		}
	}
	return nil
}

// down counts and lists the subdirectory name of cur, and makes it cur
// when it has subdirectories of its own.
func (w *walker) down(name string) error {
	fd, err := openDir(w.cur, name)
	if err != nil {
		if replaced(err) {
			return nil
		}
		return err
	}
	keep := false
	defer func() {
		if !keep {
			_ = unix.Close(fd)
		}
	}()
	// What was opened is counted, not what was listed: the name may have
	// changed hands in between.
	st, err := statAt(fd, "", unix.AT_EMPTY_PATH)
	if err != nil {
		return err
	}
	if !w.inTree(&st) || w.counted(st.Ino) {
		return nil
	}
	w.count(&st)
	subdirs, err := w.scan(fd)
	if err != nil || len(subdirs) == 0 {
		return err
	}
	keep = true
	w.setCur(fd)
	w.stack = append(w.stack, frame{name: name, id: idOf(&st), subdirs: subdirs})
	return nil
}

// up makes the directory now on top of the stack cur again, through ".."
// of the old cur. If that is no longer it (a directory was moved while
// the walk was below it), the way is found again from the root.
func (w *walker) up() error {
	if len(w.stack) == 1 {
		w.setCur(w.root)
		return nil
	}
	fd, err := openDir(w.cur, "..")
	if err == nil {
		st, serr := statAt(fd, "", unix.AT_EMPTY_PATH)
		if serr == nil && idOf(&st) == w.stack[len(w.stack)-1].id {
			w.setCur(fd)
			return nil
		}
		_ = unix.Close(fd)
	}
	return w.reacquire()
}

// reacquire walks from the root down the names on the stack to the
// directory on top of it, checking each is the directory it was. Where one
// is not (it moved), the frames from there on are dropped: what they had
// still to walk moved with them, and is counted where the walk meets it
// again, or not at all if it moved behind the walk.
func (w *walker) reacquire() error {
	fd := w.root
	for i := 1; i < len(w.stack); i++ {
		next, err := openDir(fd, w.stack[i].name)
		if err == nil {
			st, serr := statAt(next, "", unix.AT_EMPTY_PATH)
			if serr != nil || idOf(&st) != w.stack[i].id {
				_ = unix.Close(next)
				err = errors.Join(errMoved, serr)
			}
		}
		if err != nil {
			if !replaced(err) && !errors.Is(err, errMoved) {
				if fd != w.root {
					_ = unix.Close(fd)
				}
				return err
			}
			w.stack = w.stack[:i]
			break
		}
		if fd != w.root {
			_ = unix.Close(fd)
		}
		fd = next
	}
	w.setCur(fd)
	return nil
}

var errMoved = errors.New("directory moved during the walk")

// scan counts the entries of the directory fd that are not directories,
// and returns the names of those that are, to walk later.
func (w *walker) scan(fd int) ([]string, error) {
	var subdirs []string
	for {
		var n int
		err := retry(func() (err error) {
			n, err = unix.ReadDirent(fd, w.buf)
			return err
		})
		if err != nil {
			if replaced(err) {
				return subdirs, nil // removed while it was read
			}
			return subdirs, err
		}
		if n <= 0 {
			return subdirs, nil
		}
		_, _, names := unix.ParseDirent(w.buf[:n], -1, nil)
		for _, name := range names {
			if err := w.ctx.Err(); err != nil {
				return subdirs, err
			}
			st, err := statAt(fd, name, 0)
			if err != nil {
				if replaced(err) {
					continue
				}
				return subdirs, err
			}
			if !w.inTree(&st) {
				continue
			}
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				subdirs = append(subdirs, name)
				continue
			}
			if st.Nlink > 1 && w.counted(st.Ino) {
				continue
			}
			w.count(&st)
		}
	}
}

// inTree says whether st is on the root's mount. A mount point's entry
// stats as the root of what is mounted there, so it fails this too.
func (w *walker) inTree(st *unix.Statx_t) bool {
	if devOf(st) != w.dev {
		return false
	}
	return !w.mntKnown || st.Mask&unix.STATX_MNT_ID == 0 || st.Mnt_id == w.mnt
}

// counted says whether inode ino was counted already, and marks it so.
func (w *walker) counted(ino uint64) bool {
	if _, ok := w.seen[ino]; ok {
		return true
	}
	w.seen[ino] = struct{}{}
	return false
}

func (w *walker) count(st *unix.Statx_t) {
	w.u.Inodes++
	w.u.Bytes += st.Blocks * 512
}

// setCur makes fd the directory being walked, closing the one before
// unless it is the root.
func (w *walker) setCur(fd int) {
	if w.cur != w.root && w.cur != fd {
		_ = unix.Close(w.cur)
	}
	w.cur = fd
}

func (w *walker) close() {
	w.setCur(w.root)
	_ = unix.Close(w.root)
}

// openDir opens the directory name under dirfd, never through a symlink.
func openDir(dirfd int, name string) (int, error) {
	var fd int
	err := retry(func() (err error) {
		fd, err = unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		return err
	})
	return fd, err
}

// statAt stats name under dirfd (or dirfd itself, with AT_EMPTY_PATH)
// without following a symlink.
func statAt(dirfd int, name string, flags int) (unix.Statx_t, error) {
	var st unix.Statx_t
	mask := unix.STATX_TYPE | unix.STATX_MODE | unix.STATX_NLINK | unix.STATX_INO | unix.STATX_BLOCKS | unix.STATX_MNT_ID
	err := retry(func() error {
		return unix.Statx(dirfd, name, flags|unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_DONT_SYNC, mask, &st)
	})
	return st, err
}

func devOf(st *unix.Statx_t) uint64 { return unix.Mkdev(st.Dev_major, st.Dev_minor) }

func idOf(st *unix.Statx_t) fileID { return fileID{dev: devOf(st), ino: st.Ino} }

// replaced says whether err means an entry went away or changed into
// something else (a symlink, a file) between being listed and opened.
func replaced(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP)
}

// retry runs f again while a signal interrupts it.
func retry(f func() error) error {
	for {
		if err := f(); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
