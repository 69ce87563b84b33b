package podruntime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PodConfigs returns the CRI configs SyncPod starts pod with: its sandbox's
// and each app container's first attempt, security context and resources
// included, for a pod with no volumes, before its IPs are known. Like
// SyncPod it makes the pod's log directories. It calls the runtime for
// nothing, so a caller can drive CRI with exactly what Skiff would send
// (skiffbench measures the runtime's own limit this way).
func (m *Manager) PodConfigs(ctx context.Context, pod *v1.Pod) (*runtimeapi.PodSandboxConfig, []*runtimeapi.ContainerConfig, error) {
	sb := m.sandboxConfig(pod, 0)
	var out []*runtimeapi.ContainerConfig
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		cfg, cerr := m.containerConfig(ctx, pod, c, 0, c.Image, nil, nil)
		if cerr != nil {
			return nil, nil, fmt.Errorf("container %s: %w", c.Name, cerr)
		}
		sc, err := m.cfg.Security.containerSecurity(pod, c)
		if err != nil {
			return nil, nil, fmt.Errorf("container %s: %w", c.Name, err)
		}
		cfg.Linux.SecurityContext = sc
		if m.cfg.Resources != nil {
			cfg.Linux.Resources = m.cfg.Resources.ContainerResources(pod, c)
		}
		if err := os.MkdirAll(filepath.Join(sb.LogDirectory, c.Name), 0o755); err != nil {
			return nil, nil, fmt.Errorf("create log directory: %w", err)
		}
		out = append(out, cfg)
	}
	return sb, out, nil
}
