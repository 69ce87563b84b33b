package volume

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// unmountBeneath unmounts the mount at mp, a path below the directory
// base, without resolving any element below base by path: each directory
// on the way is opened relative to its parent's held descriptor with
// O_NOFOLLOW, and the unmount names the last element relative to the held
// descriptor of its parent, with UMOUNT_NOFOLLOW. A driver or pod that
// swaps a directory on the way for a symlink (renameat2 exchange) gets a
// refusal, not the unmount of whatever mount the symlink leads to; by
// path, UMOUNT_NOFOLLOW alone guards only the last element. (The mount
// itself is not opened: a descriptor on it would keep it busy.) A path
// that is missing, or no longer a mount point, is left alone: the caller
// checks what stays mounted before it removes anything.
func unmountBeneath(base, mp string) error {
	rel, err := filepath.Rel(base, mp)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return fmt.Errorf("unmount %s: not below %s", mp, base)
	}
	fd, err := unix.Open(base, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("unmount %s: open %s: %w", mp, base, err)
	}
	parts := strings.Split(rel, "/")
	for _, name := range parts[:len(parts)-1] {
		next, err := unix.Openat(fd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("unmount %s: %w", mp, describe(err))
		}
		fd = next
	}
	defer unix.Close(fd)
	// The magic link is the held parent itself, whatever its path is now.
	last := fmt.Sprintf("/proc/self/fd/%d/%s", fd, parts[len(parts)-1])
	err = unix.Unmount(last, unix.UMOUNT_NOFOLLOW)
	switch {
	case err == nil, errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
		return nil
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("unmount %s: %w", mp, describe(err))
	}
	return fmt.Errorf("unmount %s: %w", mp, err)
}
