package podruntime

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/expansion"
	"github.com/skiff-sh/skiff/internal/volume"
)

// containerMounts turns the container's volumeMounts into CRI bind mounts
// of the prepared volumes; subPathExpr expands the container's env. A
// subPath is bind-mounted under podDir first (volume.BindSubPath), and the
// runtime mounts that.
func containerMounts(c *v1.Container, podDir string, volumes map[string]volume.Mounted, env func(string) (string, bool)) ([]*runtimeapi.Mount, error) {
	var out []*runtimeapi.Mount
	for i, vm := range c.VolumeMounts {
		vol, ok := volumes[vm.Name]
		if !ok {
			return nil, fmt.Errorf("volume %q of mount %s is not prepared", vm.Name, vm.MountPath)
		}
		if vol.Device {
			return nil, fmt.Errorf("volume %q of mount %s is a raw block volume: it goes in volumeDevices", vm.Name, vm.MountPath)
		}
		sub := vm.SubPath
		if vm.SubPathExpr != "" {
			var err error
			if sub, err = expansion.ExpandStrict(vm.SubPathExpr, env); err != nil {
				return nil, err
			}
		}
		host := vol.HostPath
		if sub != "" {
			if podDir == "" {
				return nil, fmt.Errorf("mount %s of volume %q: a subPath needs the pod's directory", vm.MountPath, vm.Name)
			}
			var err error
			host, err = volume.BindSubPath(vol, sub, volume.SubPathTarget(podDir, vm.Name, c.Name, i))
			if err != nil {
				return nil, fmt.Errorf("mount %s of volume %q: %w", vm.MountPath, vm.Name, err)
			}
		}
		prop, err := propagation(c, vm.MountPropagation)
		if err != nil {
			return nil, fmt.Errorf("mount %s of volume %q: %w", vm.MountPath, vm.Name, err)
		}
		out = append(out, &runtimeapi.Mount{
			ContainerPath: vm.MountPath,
			HostPath:      host,
			Readonly:      vm.ReadOnly || vol.ReadOnly,
			Propagation:   prop,
		})
	}
	return out, nil
}

// propagation is the CRI propagation of a volumeMount's mode, as
// upstream: None (the default) is private, HostToContainer rslave,
// Bidirectional rshared. The apiserver allows Bidirectional only in
// privileged containers; Skiff refuses it for the others too, whatever
// the pod's source, as mounts made there would reach the host.
func propagation(c *v1.Container, p *v1.MountPropagationMode) (runtimeapi.MountPropagation, error) {
	if p == nil {
		return runtimeapi.MountPropagation_PROPAGATION_PRIVATE, nil
	}
	switch *p {
	case v1.MountPropagationNone:
		return runtimeapi.MountPropagation_PROPAGATION_PRIVATE, nil
	case v1.MountPropagationHostToContainer:
		return runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER, nil
	case v1.MountPropagationBidirectional:
		if sc := c.SecurityContext; sc == nil || sc.Privileged == nil || !*sc.Privileged {
			return 0, fmt.Errorf("mount propagation %s is allowed only in privileged containers", *p)
		}
		return runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL, nil
	}
	return 0, fmt.Errorf("invalid mount propagation mode %q", *p)
}
