package volume

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// noOpenat2 is set once openat2 turned out missing (Linux before 5.6) or
// filtered (a seccomp profile); the component walk does the same job then.
var noOpenat2 atomic.Bool

// openInside opens rel, a path relative to the directory base with no
// ".." element, without following any symlink on the way or at its end,
// creating missing directories as it goes, and returns the descriptor
// (O_PATH for an existing last element). Nothing outside base is opened or
// created whatever happens to the tree meanwhile: each step is relative to
// a held descriptor of the step before.
func openInside(base, rel string) (int, error) {
	return openInsideWith(base, rel, !noOpenat2.Load())
}

// openInsideWith is openInside, trying openat2 first or not.
func openInsideWith(base, rel string, tryOpenat2 bool) (int, error) {
	baseFD, err := unix.Open(base, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open volume: %w", err)
	}
	defer unix.Close(baseFD)
	var st unix.Stat_t
	if err := unix.Fstat(baseFD, &st); err != nil {
		return -1, fmt.Errorf("stat volume: %w", err)
	}
	// New directories get the volume's mode, as upstream, so that a
	// non-root container can write where it could write in the volume.
	perm := st.Mode & 0o2777
	parts, err := splitRel(rel)
	if err != nil {
		return -1, err
	}
	fd := -1
	if tryOpenat2 {
		fd, err = openBeneath(baseFD, rel)
		switch {
		case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM), errors.Is(err, unix.E2BIG):
			noOpenat2.Store(true)
		case errors.Is(err, unix.ENOENT), errors.Is(err, unix.EAGAIN):
			// Something is missing (the walk creates it), or the kernel
			// saw a rename race it would not judge (the walk needs no
			// judging: it has no "..").
		case err != nil:
			return -1, describe(err)
		}
	}
	if fd < 0 {
		if fd, err = walkInside(baseFD, parts, perm); err != nil {
			return -1, err
		}
	}
	if err := refuseSymlink(fd); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// openBeneath opens rel in one openat2 call that the kernel keeps beneath
// dirFD and that follows no symlink.
func openBeneath(dirFD int, rel string) (int, error) {
	return unix.Openat2(dirFD, rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
}

// walkInside opens parts one at a time, each relative to the descriptor of
// the one before, with O_NOFOLLOW; a missing element is made with mkdirat
// on the held parent and then opened the same way, so a symlink planted
// in between is refused, never followed.
func walkInside(baseFD int, parts []string, perm uint32) (int, error) {
	dirFD, err := unix.Dup(baseFD)
	if err != nil {
		return -1, err
	}
	for i, name := range parts {
		last := i == len(parts)-1
		flags := unix.O_RDONLY | unix.O_DIRECTORY
		if last {
			flags = unix.O_PATH // the subPath may be a file, a socket or a FIFO
		}
		fd, err := unix.Openat(dirFD, name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			fd, err = mkdirInside(dirFD, name, perm)
		}
		unix.Close(dirFD)
		if err != nil {
			return -1, fmt.Errorf("open %s: %w", strings.Join(parts[:i+1], "/"), describe(err))
		}
		dirFD = fd
	}
	return dirFD, nil
}

// mkdirInside makes the directory name in the directory dirFD (an existing
// one is fine: someone raced us) and opens it without following a symlink.
func mkdirInside(dirFD int, name string, perm uint32) (int, error) {
	made := true
	if err := unix.Mkdirat(dirFD, name, perm); errors.Is(err, unix.EEXIST) {
		made = false
	} else if err != nil {
		return -1, fmt.Errorf("mkdir: %w", err)
	}
	fd, err := unix.Openat(dirFD, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if made { // the umask took bits away
		if err := unix.Fchmod(fd, perm); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("chmod: %w", err)
		}
	}
	return fd, nil
}

// splitRel splits a cleaned relative path ("." is the base itself) and
// refuses elements no walk may take.
func splitRel(rel string) ([]string, error) {
	if rel == "." {
		return []string{"."}, nil
	}
	parts := strings.Split(rel, "/")
	for _, p := range parts {
		if p == "" || p == "." || p == ".." {
			return nil, fmt.Errorf("path %q is not clean", rel)
		}
	}
	return parts, nil
}

func refuseSymlink(fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat: %w", err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return errors.New("a symlink replaced a checked path element")
	}
	return nil
}

// describe names the errors a symlink in the way gives.
func describe(err error) error {
	switch {
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
		return fmt.Errorf("a symlink replaced a checked path element: %w", err)
	case errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("a path element is not a directory (or was replaced by a symlink): %w", err)
	}
	return err
}
