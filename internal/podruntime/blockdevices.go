package podruntime

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/volume"
)

// blockDevices turns the container's volumeDevices into CRI devices: the
// raw block volume's device on the host at the devicePath, read-write
// and mknod-able ("mrw"), or read-only ("r") for a read-only volume, as
// upstream. The runtime makes the device node and allows it in the
// container's device cgroup.
func blockDevices(c *v1.Container, volumes map[string]volume.Mounted) ([]*runtimeapi.Device, error) {
	var out []*runtimeapi.Device
	for _, vd := range c.VolumeDevices {
		vol, ok := volumes[vd.Name]
		if !ok {
			return nil, fmt.Errorf("volume %q of device %s is not prepared", vd.Name, vd.DevicePath)
		}
		if !vol.Device {
			return nil, fmt.Errorf("volume %q of device %s is not a raw block volume", vd.Name, vd.DevicePath)
		}
		perm := "mrw"
		if vol.ReadOnly {
			perm = "r"
		}
		out = append(out, &runtimeapi.Device{ContainerPath: vd.DevicePath, HostPath: vol.HostPath, Permissions: perm})
	}
	return out, nil
}
