package podruntime

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/container"
)

// syncEphemeralContainers starts each ephemeral container (kubectl debug)
// that has never run in the pod. As upstream, they are never restarted:
// one that exited, in any sandbox, stays exited.
func (m *Manager) syncEphemeralContainers(ctx context.Context, s *podSync) {
	for i := range s.pod.Spec.EphemeralContainers {
		c := (*v1.Container)(&s.pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		if s.status.FindContainer(c.Name) == nil {
			m.startContainer(ctx, s, c, nil)
		}
	}
}

// ephemeral returns the pod's ephemeral container of that name, if any.
func ephemeral(pod *v1.Pod, name string) *v1.EphemeralContainer {
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].Name == name {
			return &pod.Spec.EphemeralContainers[i]
		}
	}
	return nil
}

// targetNamespace puts an ephemeral container with a targetContainerName
// into that container's PID namespace, as upstream: only when the pod
// does not share one already (hostPID, shareProcessNamespace), and only
// while the target runs.
func (s *podSync) targetNamespace(c *v1.Container, cfg *runtimeapi.ContainerConfig) *ContainerError {
	ec := ephemeral(s.pod, c.Name)
	if ec == nil || ec.TargetContainerName == "" {
		return nil
	}
	target := s.status.FindContainer(ec.TargetContainerName)
	if target == nil || target.State != container.StateRunning {
		return &ContainerError{ReasonCreateContainerConfig, fmt.Sprintf("unable to find target container %s", ec.TargetContainerName)}
	}
	ns := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	if ns != nil && ns.Pid == runtimeapi.NamespaceMode_CONTAINER {
		ns.Pid, ns.TargetId = runtimeapi.NamespaceMode_TARGET, target.ID
	}
	return nil
}
