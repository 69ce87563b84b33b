package imagegc

import (
	"context"
	"encoding/json"

	internalapi "k8s.io/cri-api/pkg/apis"
	"k8s.io/klog/v2"
)

// runtimeSandboxImage is the sandbox image the runtime runs every pod's
// sandbox with, from its verbose status (containerd's CRI config names it
// sandboxImage); "" when it names none. containerd 1.6 does not mark that
// image pinned, and no container lists it as its image, so without its
// name image GC would remove it, and with no registry to pull it from
// again no pod could start.
func runtimeSandboxImage(ctx context.Context, rt internalapi.RuntimeService) string {
	resp, err := rt.Status(ctx, true)
	if err != nil {
		klog.V(2).InfoS("Cannot read the runtime's status for its sandbox image", "err", err)
		return ""
	}
	var cfg struct {
		SandboxImage string `json:"sandboxImage"`
	}
	if s := resp.GetInfo()["config"]; s != "" {
		if err := json.Unmarshal([]byte(s), &cfg); err != nil {
			klog.V(2).InfoS("Cannot parse the runtime's config for its sandbox image", "err", err)
		}
	}
	return cfg.SandboxImage
}

// sandboxImage is the configured sandbox image, else the runtime's, looked
// up until the runtime names one. The caller holds mu.
func (m *Manager) sandboxImage(ctx context.Context) string {
	if m.sandbox == "" {
		m.sandbox = m.cfg.SandboxImage
	}
	if m.sandbox == "" {
		if m.sandbox = runtimeSandboxImage(ctx, m.cfg.Runtime); m.sandbox != "" {
			klog.InfoS("Image garbage collection keeps the runtime's sandbox image", "image", m.sandbox)
		}
	}
	return m.sandbox
}
