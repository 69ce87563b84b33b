package pluginwatcher

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// maxDepth is how deep below the registry directory sockets are looked
// for: the directory itself and one level of subdirectories, as the
// registrars of old layouts use.
const maxDepth = 2

// socketFile is a socket found under the registry directory: its path
// relative to it, and its inode and change time, which tell a socket a
// restarted plugin re-created from the old one (inode numbers alone are
// reused at once).
type socketFile struct {
	rel   string
	dev   uint64
	ino   uint64
	ctime unix.Timespec
}

// registryTree is what a scan found: sockets by path relative to the
// registry, and the subdirectories it entered.
type registryTree struct {
	sockets map[string]socketFile
	dirs    []string
}

// scan lists the sockets under dir without following any symlink: every
// directory is opened relative to its parent's descriptor with
// O_NOFOLLOW, every entry is looked at with AT_SYMLINK_NOFOLLOW. Names
// starting with "." are ignored, as upstream.
func scan(dir string) (registryTree, error) {
	t := registryTree{sockets: map[string]socketFile{}}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return t, fmt.Errorf("open plugin registry %s: %w", dir, err)
	}
	return t, t.scanFD(fd, "", 1)
}

// scanFD scans the open directory fd (closed on return), whose path
// relative to the registry is rel.
func (t *registryTree) scanFD(fd int, rel string, depth int) error {
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("read plugin registry %q: %w", rel, err)
	}
	for _, name := range names {
		if strings.HasPrefix(name, ".") {
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // gone meanwhile
		}
		path := filepath.Join(rel, name)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFSOCK:
			t.sockets[path] = socketFile{rel: path, dev: st.Dev, ino: st.Ino, ctime: st.Ctim}
		case unix.S_IFDIR:
			if depth >= maxDepth {
				continue
			}
			sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				continue // replaced by a symlink, or gone: not followed
			}
			t.dirs = append(t.dirs, path)
			if err := t.scanFD(sub, path, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// openSocket opens the socket s under dir with O_PATH, following no
// symlink, and checks it is still the inode scan found.
func openSocket(dir string, s socketFile) (int, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	parts := strings.Split(s.rel, string(filepath.Separator))
	for i, p := range parts {
		flags := unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if i < len(parts)-1 {
			flags |= unix.O_DIRECTORY
		}
		next, err := unix.Openat(fd, p, flags, 0)
		unix.Close(fd)
		if err != nil {
			return -1, fmt.Errorf("open %s: %w", s.rel, err)
		}
		fd = next
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK || st.Dev != s.dev || st.Ino != s.ino || st.Ctim != s.ctime {
		unix.Close(fd)
		return -1, fmt.Errorf("%s is no longer the socket that was found", s.rel)
	}
	return fd, nil
}

// dialer connects to the socket s under dir through /proc/self/fd, so the
// connection reaches the inode that was checked whatever is renamed or
// swapped meanwhile.
func dialer(dir string, s socketFile) func(ctx context.Context, _ string) (net.Conn, error) {
	return func(ctx context.Context, _ string) (net.Conn, error) {
		fd, err := openSocket(dir, s)
		if err != nil {
			return nil, err
		}
		defer unix.Close(fd)
		var d net.Dialer
		conn, err := d.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(fd))
		if err != nil {
			return nil, fmt.Errorf("connect to %s: %w", s.rel, err)
		}
		return conn, nil
	}
}
