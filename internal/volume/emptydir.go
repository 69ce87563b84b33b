package volume

import (
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
)

// setUpEmptyDir makes an emptyDir: a world-writable directory on the node's
// disk, or a tmpfs (medium: Memory) sized by sizeLimit, as upstream.
func (m *Manager) setUpEmptyDir(pod *v1.Pod, vol *v1.Volume) (Mounted, error) {
	dir := filepath.Join(m.PodDir(pod.UID), "volumes", "kubernetes.io~empty-dir", vol.Name)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return Mounted{}, fmt.Errorf("create emptyDir: %w", err)
	}
	if vol.EmptyDir.Medium == v1.StorageMediumMemory && !isMountPoint(dir) {
		opts := ""
		if l := vol.EmptyDir.SizeLimit; l != nil && !l.IsZero() {
			opts = fmt.Sprintf("size=%d", l.Value())
		}
		if err := mountTmpfs(dir, opts); err != nil {
			return Mounted{}, err
		}
	}
	// 0777 as upstream: containers run as any user. Chmod, since umask
	// trims MkdirAll's mode.
	if err := os.Chmod(dir, 0o777); err != nil {
		return Mounted{}, fmt.Errorf("chmod emptyDir: %w", err)
	}
	return Mounted{HostPath: dir}, nil
}
