package podruntime

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// A container attempt's termination message file is Skiff's own:
// <pod dir>/containers/<container>/<8 hex digits>, upstream's layout.
// Skiff reads and removes a file only at that place, never a volume a pod
// mounted at its terminationMessagePath, and reaches it from held
// directory descriptors without following any symlink.
const termDirName = "containers"

// termFile is one termination message file of a container of a pod.
type termFile struct {
	podDir, container, name string
}

// ownTermFile returns the termination file hostPath names when it is the
// one Skiff makes for the container in the pod directory podDir.
func ownTermFile(podDir, container, hostPath string) (termFile, bool) {
	f := termFile{podDir: filepath.Clean(podDir), container: container, name: filepath.Base(hostPath)}
	if podDir == "" || !isPathElement(container) || !isTermFileName(f.name) || filepath.Clean(hostPath) != f.path() {
		return termFile{}, false
	}
	return f, true
}

func (f termFile) path() string {
	return filepath.Join(f.podDir, termDirName, f.container, f.name)
}

// isTermFileName: 8 lowercase hex digits, the names Skiff gives.
func isTermFileName(name string) bool {
	if len(name) != 8 {
		return false
	}
	for _, c := range name {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func isPathElement(name string) bool {
	return name != "" && name != "." && name != ".." && filepath.Base(name) == name
}

// createTermFile makes a new, empty termination file for the container,
// writable by any user the container runs as, and returns its path.
func createTermFile(podDir, container string) (string, error) {
	if !isPathElement(container) {
		return "", fmt.Errorf("container name %q is not a path element", container)
	}
	if err := os.MkdirAll(podDir, 0o750); err != nil {
		return "", err
	}
	dirFD, err := openContainerDir(podDir, container, true)
	if err != nil {
		return "", err
	}
	defer unix.Close(dirFD)
	var id [4]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", err
	}
	f := termFile{podDir: filepath.Clean(podDir), container: container, name: hex.EncodeToString(id[:])}
	fd, err := unix.Openat(dirFD, f.name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o666)
	if err != nil {
		return "", fmt.Errorf("create %s: %w", f.path(), err)
	}
	defer unix.Close(fd)
	// Whatever the umask, any user the container runs as may write it.
	if err := unix.Fchmod(fd, 0o666); err != nil {
		return "", fmt.Errorf("chmod %s: %w", f.path(), err)
	}
	return f.path(), nil
}

// openContainerDir opens <podDir>/containers/<container>, each element
// relative to the one before and never through a symlink, making the
// missing ones when create is set.
func openContainerDir(podDir, container string, create bool) (int, error) {
	fd, err := unix.Open(podDir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", podDir, err)
	}
	dir := podDir
	for _, name := range []string{termDirName, container} {
		dir = filepath.Join(dir, name)
		if create {
			if err := unix.Mkdirat(fd, name, 0o750); err != nil && !errors.Is(err, unix.EEXIST) {
				unix.Close(fd)
				return -1, fmt.Errorf("mkdir %s: %w", dir, err)
			}
		}
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return -1, fmt.Errorf("open %s: %w", dir, err)
		}
		fd = next
	}
	return fd, nil
}

// read returns at most the last limit bytes of the file. Anything but a
// regular file is refused before it is opened for reading, so a FIFO or a
// device in its place can neither block the read nor be read.
func (f termFile) read(limit int64) ([]byte, error) {
	dirFD, err := openContainerDir(f.podDir, f.container, false)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dirFD)
	pathFD, err := unix.Openat(dirFD, f.name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: f.path(), Err: err}
	}
	defer unix.Close(pathFD)
	var st unix.Stat_t
	if err := unix.Fstat(pathFD, &st); err != nil {
		return nil, fmt.Errorf("stat %s: %w", f.path(), err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%s is not a regular file", f.path())
	}
	// Reopening the held descriptor reads the inode just checked, whatever
	// its name points to by now.
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(pathFD), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("reopen %s: %w", f.path(), err)
	}
	file := os.NewFile(uintptr(fd), f.path())
	defer file.Close()
	return readTail(file, limit)
}

// readTail reads at most the last max bytes of an open regular file.
func readTail(file *os.File, limit int64) ([]byte, error) {
	fi, err := file.Stat()
	if err != nil {
		return nil, err
	}
	off := max(fi.Size()-limit, 0)
	buf := make([]byte, min(fi.Size(), limit))
	n, err := file.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) { // EOF: it shrank meanwhile
		return nil, err
	}
	return buf[:n], nil
}

// remove unlinks the file from Skiff's own directory; an entry that is
// not a regular file was not made by Skiff and stays.
func (f termFile) remove() error {
	dirFD, err := openContainerDir(f.podDir, f.container, false)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(dirFD)
	var st unix.Stat_t
	if err := unix.Fstatat(dirFD, f.name, &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) {
		return nil
	} else if err != nil {
		return fmt.Errorf("stat %s: %w", f.path(), err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("%s is not a regular file: left in place", f.path())
	}
	if err := unix.Unlinkat(dirFD, f.name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove %s: %w", f.path(), err)
	}
	return nil
}
