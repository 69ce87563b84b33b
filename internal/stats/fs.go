package stats

import (
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

func metaTime(t time.Time) metav1.Time { return metav1.NewTime(t) }

// fsInfo is the capacity side of a filesystem, from statfs.
type fsInfo struct {
	capacity, available, used uint64
	inodes, inodesFree        uint64
}

func statfs(path string) (fsInfo, error) {
	var s syscall.Statfs_t
	if err := syscall.Statfs(path, &s); err != nil {
		return fsInfo{}, err
	}
	return infoOf(&s), nil
}

// fstatfs is statfs of the filesystem an open fd is on.
func fstatfs(fd int) (fsInfo, error) {
	var s syscall.Statfs_t
	if err := syscall.Fstatfs(fd, &s); err != nil {
		return fsInfo{}, err
	}
	return infoOf(&s), nil
}

func infoOf(s *syscall.Statfs_t) fsInfo {
	bs := uint64(s.Bsize)
	return fsInfo{
		capacity: s.Blocks * bs, available: s.Bavail * bs, used: (s.Blocks - s.Bfree) * bs,
		inodes: s.Files, inodesFree: s.Ffree,
	}
}

// fsStats is the filesystem of path with its own usage, as FsStats.
func (i fsInfo) fsStats(t time.Time, used, inodesUsed *uint64) *statsapi.FsStats {
	fs := &statsapi.FsStats{
		Time: metaTime(t), CapacityBytes: ptr(i.capacity), AvailableBytes: ptr(i.available),
		UsedBytes: used, Inodes: ptr(i.inodes), InodesFree: ptr(i.inodesFree), InodesUsed: inodesUsed,
	}
	return fs
}

// wholeFs is the filesystem's own usage: the node's fs and imageFs.
func (i fsInfo) wholeFs(t time.Time) *statsapi.FsStats {
	return i.fsStats(t, ptr(i.used), ptr(sub(i.inodes, i.inodesFree)))
}

func ptr[T any](v T) *T { return &v }
