package du

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// OpenBeneath opens the directory base/rel, trusting only base's own path:
// each element of rel is opened relative to its parent's held fd with
// O_NOFOLLOW, so a directory on the way that was swapped for a symlink
// fails the open (ELOOP or ENOTDIR) instead of leading elsewhere. A
// missing element is an error wrapping fs.ErrNotExist. The caller closes
// the fd.
func OpenBeneath(base, rel string) (int, error) {
	rel = filepath.Clean(rel)
	if filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
		return -1, fmt.Errorf("open %s: not below %s", rel, base)
	}
	var fd int
	err := retry(func() (err error) {
		fd, err = unix.Open(base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", base, err)
	}
	if rel == "." {
		return fd, nil
	}
	for _, name := range strings.Split(rel, "/") {
		next, err := openDir(fd, name)
		unix.Close(fd)
		if err != nil {
			return -1, fmt.Errorf("open %s below %s: %w", rel, base, err)
		}
		fd = next
	}
	return fd, nil
}

// DirFD is Dir for the directory open at fd, which stays the caller's.
func DirFD(ctx context.Context, fd int) (Usage, error) {
	own, err := unix.Dup(fd)
	if err != nil {
		return Usage{}, fmt.Errorf("disk usage: %w", err)
	}
	u, err := walkFD(ctx, own)
	if err != nil {
		return u, fmt.Errorf("disk usage: %w", err)
	}
	return u, nil
}

// DirBeneath is Dir for base/rel, opened as OpenBeneath opens it.
func DirBeneath(ctx context.Context, base, rel string) (Usage, error) {
	fd, err := OpenBeneath(base, rel)
	if err != nil {
		return Usage{}, fmt.Errorf("disk usage: %w", err)
	}
	defer unix.Close(fd)
	u, err := DirFD(ctx, fd)
	if err != nil {
		return u, fmt.Errorf("%s below %s: %w", rel, base, err)
	}
	return u, nil
}
