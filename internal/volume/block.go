package volume

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// isBlock tells whether the PV is a raw block volume.
func isBlock(pv *v1.PersistentVolume) bool {
	return pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == v1.PersistentVolumeBlock
}

// checkVolumeMode refuses, as upstream, a claim volume that a container
// mounts while its PV is a block volume, or takes as a device while it
// is a filesystem.
func checkVolumeMode(pod *v1.Pod, name string, pv *v1.PersistentVolume) error {
	mode := v1.PersistentVolumeFilesystem
	if isBlock(pv) {
		mode = v1.PersistentVolumeBlock
	}
	mounted, device := false, false
	visit := func(cs []v1.Container) {
		for i := range cs {
			for _, m := range cs[i].VolumeMounts {
				mounted = mounted || m.Name == name
			}
			for _, d := range cs[i].VolumeDevices {
				device = device || d.Name == name
			}
		}
	}
	visit(pod.Spec.InitContainers)
	visit(pod.Spec.Containers)
	for i := range pod.Spec.EphemeralContainers {
		visit([]v1.Container{v1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)})
	}
	if mounted && mode != v1.PersistentVolumeFilesystem {
		return fmt.Errorf("volume %s has volumeMode %s, but is specified in volumeMounts", name, mode)
	}
	if device && mode != v1.PersistentVolumeBlock {
		return fmt.Errorf("volume %s has volumeMode %s, but is specified in volumeDevices", name, mode)
	}
	return nil
}
