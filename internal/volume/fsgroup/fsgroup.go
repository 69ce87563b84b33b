// Package fsgroup gives a volume's files the pod's fsGroup, as upstream's
// volume ownership change does: every file, directory and symlink gets
// the group; files and directories gain group read and write (read only
// for a read-only volume), directories also group search and setgid, so
// that what the pod makes later inherits the group. With the
// OnRootMismatch policy nothing is walked when the volume's root already
// has the group and those bits.
//
// The tree belongs to the pod, which may change it while the walk runs.
// So nothing in it is resolved by path: each entry is opened relative to
// its directory's held fd with O_PATH|O_NOFOLLOW, what that fd is is
// read from the fd, and the change goes to that fd. A directory swapped
// for a symlink meanwhile is seen as the symlink (its group changes, not
// its target's), and nothing on another mount is entered or changed.
package fsgroup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// Upstream's masks: group read-write, read-only, and search.
const (
	rwMask   = 0o660
	roMask   = 0o440
	execMask = 0o110
)

// MaxDepth bounds how deep the walk goes: it holds one fd per level.
const MaxDepth = 512

// Options are the pod's fsGroup settings for one volume.
type Options struct {
	GID      int64
	ReadOnly bool
	// Policy is the pod's fsGroupChangePolicy; nil is Always.
	Policy *v1.PodFSGroupChangePolicy
}

// Apply gives the tree of the directory dirFD (which the caller keeps)
// the group, unless the policy says the root shows it was done. Changes
// that fail on one entry are logged and the walk goes on, as upstream;
// the error is for a walk that could not be made (the root unreadable,
// too deep, ctx ended).
func Apply(ctx context.Context, dirFD int, o Options) error {
	root, err := stat(dirFD)
	if err != nil {
		return fmt.Errorf("stat volume root: %w", err)
	}
	if o.Policy != nil && *o.Policy == v1.FSGroupChangeOnRootMismatch && !rootMismatch(&root, o) {
		klog.V(3).InfoS("Skipping fsGroup change: the volume root has the group and mode already", "gid", o.GID)
		return nil
	}
	fd, err := unix.Openat(dirFD, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open volume root: %w", err)
	}
	w := &walker{ctx: ctx, o: o, dev: devOf(&root), mnt: root.Mnt_id, mntKnown: root.Mask&unix.STATX_MNT_ID != 0}
	return w.dir(fd, &root, 0) // closes fd
}

// rootMismatch is upstream's requiresPermissionChange: the root lacks the
// group, the mask's bits, or setgid.
func rootMismatch(st *unix.Statx_t, o Options) bool {
	if int64(st.Gid) != o.GID || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return true
	}
	want := uint16(rwMask | execMask)
	if o.ReadOnly {
		want = roMask | execMask
	}
	return st.Mode&want != want || st.Mode&unix.S_ISGID == 0
}

type walker struct {
	ctx      context.Context
	o        Options
	dev, mnt uint64
	mntKnown bool
}

// onMount says whether st is on the root's mount: a mount point's entry
// stats as the root of what is mounted there, so it is not.
func (w *walker) onMount(st *unix.Statx_t) bool {
	return devOf(st) == w.dev && (!w.mntKnown || st.Mask&unix.STATX_MNT_ID == 0 || st.Mnt_id == w.mnt)
}

// dir changes the entries of the directory fd, then the directory itself
// (whose stat is st), and closes fd.
func (w *walker) dir(fd int, st *unix.Statx_t, depth int) error {
	defer unix.Close(fd)
	if depth > MaxDepth {
		return fmt.Errorf("the volume's tree is deeper than %d levels", MaxDepth)
	}
	names, err := readNames(fd)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		if err := w.entry(fd, name, depth); err != nil {
			return err
		}
	}
	w.change(fd, st)
	return nil
}

// entry changes the entry name of the directory dirFD: opened without
// following it, and left alone if it went away or is on another mount.
func (w *walker) entry(dirFD int, name string, depth int) error {
	fd, err := unix.Openat(dirFD, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil // gone since it was listed
	}
	st, err := stat(fd)
	if err != nil || !w.onMount(&st) {
		unix.Close(fd)
		return nil
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		w.change(fd, &st)
		unix.Close(fd)
		return nil
	}
	// The directory this O_PATH fd holds, whatever its name is now.
	dfd, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	unix.Close(fd)
	if err != nil {
		return nil
	}
	return w.dir(dfd, &st, depth+1)
}

// change gives the file of fd the group and, unless it is a symlink, the
// mask's bits (setgid and search too for a directory), as upstream's
// changeFilePermission; failures are logged, not returned.
func (w *walker) change(fd int, st *unix.Statx_t) {
	if err := unix.Fchownat(fd, "", -1, int(w.o.GID), unix.AT_EMPTY_PATH); err != nil {
		klog.ErrorS(err, "Cannot give a volume's file the fsGroup", "gid", w.o.GID)
	}
	typ := st.Mode & unix.S_IFMT
	if typ == unix.S_IFLNK {
		return // a symlink's mode means nothing; chmod would reach its target
	}
	mask := uint32(rwMask)
	if w.o.ReadOnly {
		mask = roMask
	}
	if typ == unix.S_IFDIR {
		mask |= unix.S_ISGID | execMask
	}
	mode := uint32(st.Mode&0o7777) | mask
	// An O_PATH fd takes no fchmod; its /proc/self/fd link reaches
	// exactly the file it holds, never a path.
	if err := unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), mode); err != nil {
		klog.ErrorS(err, "Cannot give a volume's file the fsGroup's mode", "mode", fmt.Sprintf("%o", mode))
	}
}

// readNames lists the directory fd (which stays open).
func readNames(fd int) ([]string, error) {
	dup, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), ".")
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return nil, fmt.Errorf("list a volume directory: %w", err)
	}
	return names, nil
}

func stat(fd int) (unix.Statx_t, error) {
	var st unix.Statx_t
	err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW,
		unix.STATX_TYPE|unix.STATX_MODE|unix.STATX_GID|unix.STATX_MNT_ID, &st)
	return st, err
}

func devOf(st *unix.Statx_t) uint64 { return unix.Mkdev(st.Dev_major, st.Dev_minor) }
