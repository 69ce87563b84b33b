package volume

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// A container's subPath is made safe in two steps, as upstream does
// (pkg/volume/util/subpath): the path is opened from the volume root
// through file descriptors without following any symlink (openfd.go), and
// the open descriptor is bind-mounted from /proc/self/fd/N onto a
// kubelet-private mount point. The runtime gets that mount point, so what
// it mounts is the checked inode whatever a container does to the volume
// meanwhile: a directory swapped for a symlink after the check is not
// followed by anyone.

// subPathsDir holds the bind mounts of a pod's subPaths, in the pod's
// directory and out of every container's reach.
const subPathsDir = "volume-subpaths"

// SubPathTarget is the mount point of one volumeMount's subPath:
// <podDir>/volume-subpaths/<volume>/<container>/<index>, as upstream.
func SubPathTarget(podDir, volume, container string, index int) string {
	return filepath.Join(podDir, subPathsDir, volume, container, strconv.Itoa(index))
}

// BindSubPath makes subPath of vol available at target (see SubPathTarget)
// and returns target, the path the runtime must mount. Missing directories
// of subPath are created inside the volume with the volume's mode, as
// upstream. A subPath that is absolute, has a ".." element, or leads out of
// the volume through a symlink is refused; a symlink inside the volume that
// points inside it is followed. Whatever an earlier attempt left mounted
// at target is replaced, so every container start mounts a freshly
// checked path.
func BindSubPath(vol Mounted, subPath, target string) (string, error) {
	if err := checkSubPath(subPath); err != nil {
		return "", err
	}
	base, err := filepath.EvalSymlinks(vol.HostPath)
	if err != nil {
		return "", fmt.Errorf("resolve volume path: %w", err)
	}
	rel, err := resolveInside(base, subPath)
	if err != nil {
		return "", err
	}
	fd, err := openInside(base, rel)
	if err != nil {
		return "", fmt.Errorf("subPath %q: %w", subPath, err)
	}
	defer unix.Close(fd)
	if err := bindFD(fd, target); err != nil {
		return "", fmt.Errorf("subPath %q: %w", subPath, err)
	}
	klog.V(4).InfoS("Bound subPath", "volume", vol.HostPath, "subPath", subPath, "target", target)
	return target, nil
}

// checkSubPath refuses what no volume may contain: absolute paths and
// ".." elements.
func checkSubPath(subPath string) error {
	if subPath == "" {
		return errors.New("subPath is empty")
	}
	if filepath.IsAbs(subPath) {
		return fmt.Errorf("subPath %q must be a relative path", subPath)
	}
	for _, el := range strings.Split(filepath.ToSlash(subPath), "/") {
		if el == ".." {
			return fmt.Errorf("subPath %q must not contain '..'", subPath)
		}
	}
	return nil
}

// resolveInside turns subPath into a path relative to base with the
// symlinks of its existing part resolved, refusing one that resolves out
// of base. The result is only a proposal: openInside then opens it
// without following anything, so a symlink planted after this check makes
// the open fail instead of leading elsewhere.
func resolveInside(base, subPath string) (string, error) {
	cur := base
	parts := strings.Split(filepath.Clean(subPath), string(filepath.Separator))
	for i, el := range parts {
		next := filepath.Join(cur, el)
		fi, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			cur = filepath.Join(append([]string{cur}, parts[i:]...)...)
			break
		}
		if err != nil {
			return "", fmt.Errorf("subPath %q: %w", subPath, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			resolved, err := filepath.EvalSymlinks(next)
			if err != nil {
				return "", fmt.Errorf("subPath %q: %w", subPath, err)
			}
			if !within(base, resolved) {
				return "", fmt.Errorf("subPath %q resolves to %s, outside the volume", subPath, resolved)
			}
			next = resolved
		}
		cur = next
	}
	rel, err := filepath.Rel(base, cur)
	if err != nil || !within(base, cur) {
		return "", fmt.Errorf("subPath %q resolves to %s, outside the volume", subPath, cur)
	}
	return rel, nil
}

func within(base, p string) bool {
	return p == base || base == "/" || strings.HasPrefix(p, base+string(filepath.Separator))
}

// bindFD bind-mounts the open file fd onto target, after unmounting what
// an earlier attempt left there, and checks that target then is fd's inode.
func bindFD(fd int, target string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat opened subPath: %w", err)
	}
	isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return errors.New("is a symlink") // openInside refuses these; never mount one
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		return fmt.Errorf("create subPath mount point: %w", err)
	}
	if err := unmountAll(target); err != nil {
		return err
	}
	if err := makeMountPoint(target, isDir); err != nil {
		return err
	}
	src := "/proc/self/fd/" + strconv.Itoa(fd)
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind mount onto %s: %w", target, err)
	}
	var got unix.Stat_t
	if err := unix.Stat(target, &got); err != nil || got.Dev != st.Dev || got.Ino != st.Ino {
		if uerr := unmountAll(target); uerr != nil {
			klog.ErrorS(uerr, "Cannot unmount a wrong subPath mount", "target", target)
		}
		return fmt.Errorf("bind mount onto %s does not show the opened file (%v)", target, err)
	}
	return nil
}

// makeMountPoint makes target an empty directory or file, matching what
// is mounted onto it.
func makeMountPoint(target string, isDir bool) error {
	fi, err := os.Lstat(target)
	if err == nil && fi.IsDir() == isDir && (isDir || fi.Mode().IsRegular()) {
		return nil
	}
	if err == nil {
		if err := os.Remove(target); err != nil {
			return fmt.Errorf("replace subPath mount point: %w", err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("subPath mount point: %w", err)
	}
	if isDir {
		err = os.Mkdir(target, 0o750)
	} else {
		err = os.WriteFile(target, nil, 0o640)
	}
	if err != nil {
		return fmt.Errorf("create subPath mount point: %w", err)
	}
	return nil
}

// unmountAll unmounts every mount stacked on target; a target that is no
// mount point, or does not exist, is fine.
func unmountAll(target string) error {
	for range 64 {
		err := unix.Unmount(target, unix.UMOUNT_NOFOLLOW)
		switch {
		case err == nil:
			continue
		case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
			return nil
		case errors.Is(err, unix.EBUSY):
			if err := unix.Unmount(target, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err != nil {
				return fmt.Errorf("unmount %s: %w", target, err)
			}
		default:
			return fmt.Errorf("unmount %s: %w", target, err)
		}
	}
	return fmt.Errorf("unmount %s: still mounted after 64 unmounts", target)
}
