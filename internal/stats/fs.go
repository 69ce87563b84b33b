package stats

import (
	"io/fs"
	"os"
	"path/filepath"
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
	bs := uint64(s.Bsize)
	return fsInfo{
		capacity: s.Blocks * bs, available: s.Bavail * bs, used: (s.Blocks - s.Bfree) * bs,
		inodes: s.Files, inodesFree: s.Ffree,
	}, nil
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

// usage is what a directory tree takes on disk.
type usage struct {
	bytes, inodes uint64
}

// dirUsage walks dir as du does: allocated blocks, hard links counted once,
// symlinks not followed. A tree that changes under the walk is counted as
// far as it can be read.
func dirUsage(dir string) (usage, error) {
	var u usage
	seen := map[uint64]bool{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		if st.Nlink > 1 && !fi.IsDir() {
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
		}
		u.inodes++
		u.bytes += uint64(st.Blocks) * 512
		return nil
	})
	return u, err
}

func ptr[T any](v T) *T { return &v }
