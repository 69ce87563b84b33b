package volume

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/skiff-sh/skiff/internal/volume/mountinfo"
)

func mountTmpfs(dir, opts string) error {
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", dir, err)
	}
	return nil
}

var (
	isMountPoint = mountinfo.IsMountPoint
	mountsUnder  = mountinfo.Under
)
