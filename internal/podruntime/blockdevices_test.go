package podruntime

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/volume"
)

// A raw block volume reaches the container as a CRI device at its
// devicePath, "mrw" or "r" for a read-only volume; a block volume in
// volumeMounts, or a filesystem one in volumeDevices, is refused.
func TestBlockDevices(t *testing.T) {
	vols := map[string]volume.Mounted{
		"raw": {HostPath: "/root/plugins/kubernetes.io/csi/volumeDevices/publish/pv/uid", Device: true},
		"ro":  {HostPath: "/dev-ro", Device: true, ReadOnly: true},
		"fs":  {HostPath: "/root/pods/uid/volumes/kubernetes.io~csi/pv/mount"},
	}
	c := &v1.Container{Name: "c", VolumeDevices: []v1.VolumeDevice{{Name: "raw", DevicePath: "/dev/xvda"}, {Name: "ro", DevicePath: "/dev/xvdb"}}}
	got, err := blockDevices(c, vols)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ContainerPath != "/dev/xvda" || got[0].HostPath != vols["raw"].HostPath || got[0].Permissions != "mrw" ||
		got[1].ContainerPath != "/dev/xvdb" || got[1].Permissions != "r" {
		t.Errorf("devices %v", got)
	}
	c.VolumeDevices = []v1.VolumeDevice{{Name: "fs", DevicePath: "/dev/xvdc"}}
	if _, err := blockDevices(c, vols); err == nil || !strings.Contains(err.Error(), "not a raw block volume") {
		t.Errorf("a filesystem volume as a device: %v", err)
	}
	c.VolumeDevices = nil
	c.VolumeMounts = []v1.VolumeMount{{Name: "raw", MountPath: "/data"}}
	if _, err := containerMounts(c, "", vols, nil); err == nil || !strings.Contains(err.Error(), "goes in volumeDevices") {
		t.Errorf("a block volume mounted: %v", err)
	}
}
