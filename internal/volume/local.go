package volume

import (
	"fmt"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// setUpLocal bind-mounts a local PV's path onto dir in the pod's
// directory, read-only if asked, as upstream's local volume plugin does.
// The path is opened once and the mount made from that descriptor, so the
// mount shows the directory that was checked; a mount already there that
// shows it is kept.
func setUpLocal(path, dir string, readOnly bool) (Mounted, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return Mounted{}, fmt.Errorf("local volume path %s: %w", path, err)
	}
	defer unix.Close(fd)
	if mountedFrom(fd, dir) {
		return Mounted{HostPath: dir, ReadOnly: readOnly}, nil
	}
	if err := bindFD(fd, dir); err != nil {
		return Mounted{}, fmt.Errorf("local volume %s: %w", path, err)
	}
	if readOnly {
		flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY)
		if err := unix.Mount("", dir, "", flags, ""); err != nil {
			if uerr := unmountAll(dir); uerr != nil {
				klog.ErrorS(uerr, "Cannot unmount a local volume left writable", "dir", dir)
			}
			return Mounted{}, fmt.Errorf("remount local volume %s read-only: %w", dir, err)
		}
	}
	klog.V(4).InfoS("Mounted local volume", "path", path, "dir", dir, "readOnly", readOnly)
	return Mounted{HostPath: dir, ReadOnly: readOnly}, nil
}

// mountedFrom tells whether dir is a mount point that shows fd's inode.
func mountedFrom(fd int, dir string) bool {
	if !isMountPoint(dir) {
		return false
	}
	var want, got unix.Stat_t
	if unix.Fstat(fd, &want) != nil || unix.Lstat(dir, &got) != nil {
		return false
	}
	return want.Dev == got.Dev && want.Ino == got.Ino
}
