package nodestatus

import (
	"context"
	"fmt"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// RuntimeConfigUpdater is the CRI call that hands the pod CIDR to the
// runtime (containerd then writes its CNI config from its template).
type RuntimeConfigUpdater interface {
	UpdateRuntimeConfig(ctx context.Context, cfg *runtimeapi.RuntimeConfig) error
}

// SetRuntimePodCIDR tells the runtime the node's pod CIDR(s), comma
// separated for dual stack. Standalone, the kubelet calls it at start with
// the configuration's podCIDR; in a cluster the Controller does it with the
// Node's spec.podCIDRs.
func SetRuntimePodCIDR(ctx context.Context, rt RuntimeConfigUpdater, cidr string) error {
	cfg := &runtimeapi.RuntimeConfig{NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: cidr}}
	if err := rt.UpdateRuntimeConfig(ctx, cfg); err != nil {
		return fmt.Errorf("failed to update pod CIDR %q in the container runtime: %w", cidr, err)
	}
	klog.FromContext(ctx).Info("Updated pod CIDR in the container runtime", "podCIDR", cidr)
	return nil
}

// updatePodCIDR hands the Node's pod CIDRs to the runtime when they differ
// from what it last accepted. Like upstream it reports a change also when
// the call fails, so that the failure is retried (and the status posted)
// on the next update.
func (c *Controller) updatePodCIDR(ctx context.Context, cidrs []string) bool {
	if len(cidrs) == 0 {
		return false
	}
	cidr := strings.Join(cidrs, ",")
	c.mu.Lock()
	old := c.podCIDR
	c.mu.Unlock()
	if old == cidr {
		return false
	}
	if err := SetRuntimePodCIDR(ctx, c.cfg.Runtime, cidr); err != nil {
		klog.FromContext(ctx).Error(err, "Error updating pod CIDR")
		return true
	}
	c.mu.Lock()
	c.podCIDR = cidr
	c.mu.Unlock()
	return true
}
