package csi

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// rootDir is Skiff's root directory (--root-dir). Its own path is trusted;
// what lies below it is not: a driver sees <root>/plugins and <root>/pods
// (its deployment mounts them) and can swap any directory there for a
// symlink to a host path at any moment, even between two of Skiff's calls.
// So nothing below the root is ever resolved by path: each element is
// opened relative to its parent's held fd with O_NOFOLLOW, made with
// mkdirat, removed with unlinkat. A symlink met on the way is refused
// (ELOOP), never followed.
type rootDir string

func (d *Drivers) root() rootDir { return rootDir(filepath.Clean(d.cfg.RootDir)) }

// dirMode is the mode of the directories Skiff makes, as upstream's.
const dirMode = 0o750

// errEscapes is a path that is not below the root directory.
var errEscapes = errors.New("is not below the root directory")

// elems splits path, which must be the root or lie below it, into its
// elements below the root (none for the root).
func (r rootDir) elems(path string) ([]string, error) {
	rel, err := filepath.Rel(string(r), filepath.Clean(path))
	if err == nil && rel == "." {
		return nil, nil
	}
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return nil, fmt.Errorf("%s %w %s", path, errEscapes, r)
	}
	return strings.Split(rel, "/"), nil
}

// openRoot opens the root directory itself, making it first if create.
func (r rootDir) openRoot(create bool) (int, error) {
	if create {
		if err := os.MkdirAll(string(r), dirMode); err != nil {
			return -1, err
		}
	}
	fd, err := unix.Open(string(r), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: string(r), Err: err}
	}
	return fd, nil
}

// open opens the directory path below the root, element by element,
// never following a symlink; with create, missing elements are made
// (mode dirMode) on the way. The caller closes the fd.
func (r rootDir) open(path string, create bool) (int, error) {
	elems, err := r.elems(path)
	if err != nil {
		return -1, err
	}
	fd, err := r.openRoot(create)
	if err != nil {
		return -1, err
	}
	for _, name := range elems {
		next, err := openChild(fd, name, create)
		unix.Close(fd)
		if err != nil {
			return -1, &os.PathError{Op: "open", Path: path, Err: describeLink(err)}
		}
		fd = next
	}
	return fd, nil
}

// openChild opens the directory name in the directory dirFD without
// following a symlink, making it first if create and it is missing (one
// made meanwhile by someone else is fine, and opened the same way).
func openChild(dirFD int, name string, create bool) (int, error) {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(dirFD, name, flags, 0)
	if !create || !errors.Is(err, unix.ENOENT) {
		return fd, err
	}
	if err := unix.Mkdirat(dirFD, name, dirMode); err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, err
	}
	return unix.Openat(dirFD, name, flags, 0)
}

// mkdirAll makes the directory path and its missing parents below the
// root.
func (r rootDir) mkdirAll(path string) error {
	fd, err := r.open(path, true)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	return unix.Close(fd)
}

// readDir lists the directory path below the root, with the entries'
// types as the directory gives them (a symlink is a symlink); a missing
// one has no entries.
func (r rootDir) readDir(path string) ([]os.DirEntry, error) {
	fd, err := r.open(path, false)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	return f.ReadDir(-1)
}

// removeAt removes name from the directory path below the root, a
// directory (it must be empty) if dir; a missing one is fine.
func (r rootDir) removeAt(path, name string, dir bool) error {
	fd, err := r.open(path, false)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	flags := 0
	if dir {
		flags = unix.AT_REMOVEDIR
	}
	if err := unix.Unlinkat(fd, name, flags); err != nil && !errors.Is(err, unix.ENOENT) {
		return &os.PathError{Op: "remove", Path: filepath.Join(path, name), Err: err}
	}
	return nil
}

// describeLink names what ELOOP and ENOTDIR mean on an O_NOFOLLOW walk.
func describeLink(err error) error {
	switch {
	case errors.Is(err, unix.ELOOP):
		return fmt.Errorf("a symlink is in the way, refused: %w", err)
	case errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("an element is not a directory (a symlink or a file is in the way), refused: %w", err)
	}
	return err
}
