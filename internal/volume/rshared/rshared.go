// Package rshared makes the kubelet's root directory a shared mount, as
// upstream's kubelet does at start: a CSI node plugin's mounts under
// <root>/pods and <root>/plugins, made in its container through a
// Bidirectional volume mount, then propagate back to the host, and the
// runtime accepts Bidirectional (it wants the source on a shared mount)
// and HostToContainer (shared or slave) for paths under the root.
package rshared

import (
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/volume/mountinfo"
)

// Make leaves dir on a shared mount: when the mount that holds it already
// is one, nothing changes; otherwise dir is bind-mounted on itself and
// made rshared (mount --bind dir dir; mount --make-rshared dir). A
// restarted Skiff finds the bind in place and does nothing.
func Make(dir string) error {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("resolve %s: %w", dir, err)
	}
	if real, err = filepath.Abs(real); err != nil {
		return err
	}
	m, err := mountinfo.Containing(real)
	if err != nil {
		return err
	}
	if m.Shared {
		klog.V(4).InfoS("Root directory already on a shared mount", "path", real, "mount", m.Point)
		return nil
	}
	klog.InfoS("Bind-mounting the root directory with shared mount propagation", "path", real)
	if err := unix.Mount(real, real, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mount %s on itself: %w", real, err)
	}
	if err := unix.Mount("", real, "", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("make %s rshared: %w", real, err)
	}
	return nil
}
