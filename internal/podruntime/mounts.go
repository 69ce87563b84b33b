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
		out = append(out, &runtimeapi.Mount{
			ContainerPath: vm.MountPath,
			HostPath:      host,
			Readonly:      vm.ReadOnly || vol.ReadOnly,
			Propagation:   propagation(vm.MountPropagation),
		})
	}
	return out, nil
}

func propagation(p *v1.MountPropagationMode) runtimeapi.MountPropagation {
	if p == nil {
		return runtimeapi.MountPropagation_PROPAGATION_PRIVATE
	}
	switch *p {
	case v1.MountPropagationHostToContainer:
		return runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER
	case v1.MountPropagationBidirectional:
		return runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL
	}
	return runtimeapi.MountPropagation_PROPAGATION_PRIVATE
}
