package kubelet

import (
	"context"
	"errors"
	"fmt"
	"os"

	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/cri"
	"github.com/skiff-sh/skiff/internal/metrics"
	"github.com/skiff-sh/skiff/internal/nodestatus"
	"github.com/skiff-sh/skiff/internal/volume/rshared"
)

// Run connects Skiff to its runtime and apiserver as cfg says, builds it
// and runs it until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	d, err := Connect(ctx, cfg)
	if err != nil {
		return err
	}
	k, err := New(d)
	if err != nil {
		return err
	}
	return k.Run(ctx)
}

// Connect makes the real dependencies cfg names: it creates the root
// directory (on a shared mount) and the QoS cgroups, dials the CRI
// endpoints, finds the host's IPs and, with a kubeconfig, builds the
// apiserver client (bootstrapping its credentials if asked).
func Connect(ctx context.Context, cfg Config) (Deps, error) {
	kc := cfg.Kubelet
	d := Deps{Config: cfg}
	if cfg.Kubeconfig == "" && cfg.BootstrapKubeconfig != "" {
		return d, errors.New("--bootstrap-kubeconfig needs --kubeconfig: the path where the bootstrapped kubeconfig is written")
	}
	if err := os.MkdirAll(cfg.RootDir, 0o750); err != nil {
		return d, fmt.Errorf("create root directory: %w", err)
	}
	// As upstream: CSI node plugins' Bidirectional mounts need it.
	if err := rshared.Make(cfg.RootDir); err != nil {
		return d, fmt.Errorf("configure root directory: %w", err)
	}
	if d.Config.Metrics == nil {
		d.Config.Metrics = metrics.New()
	}
	var err error
	if d.CRI, err = cri.Dial(ctx, kc.ContainerRuntimeEndpoint, kc.ImageServiceEndpoint, kc.RuntimeRequestTimeout.Duration, d.Config.Metrics); err != nil {
		return d, err
	}
	klog.InfoS("Connected to container runtime", "endpoint", kc.ContainerRuntimeEndpoint, "runtime", d.CRI.RuntimeName, "version", d.CRI.RuntimeVersion)
	// After the dial: the runtime's RuntimeConfig names the cgroup driver.
	if d.Cgroups, err = NewPodCgroups(ctx, cfg, d.CRI.Runtime); err != nil {
		return d, err
	}
	if kc.PodCIDR != "" { // as upstream, in both modes; a Node's podCIDRs come later
		if err := nodestatus.SetRuntimePodCIDR(ctx, d.CRI.Runtime, kc.PodCIDR); err != nil {
			klog.ErrorS(err, "Pod CIDR update failed")
		}
	}
	if d.HostIPs, err = nodestatus.HostIPs(ctx, splitIPs(cfg.NodeIP), cfg.NodeName); err != nil {
		klog.InfoS("Host IP unknown; pods report none", "err", err)
	}
	if cfg.Kubeconfig != "" {
		var apis apiClients
		if apis, d.Creds, err = newClient(ctx, d.Config); err != nil {
			return d, err
		}
		d.Client, d.Heartbeat, d.Reviews, d.Events = apis.main, apis.heartbeat, apis.reviews, apis.events
	}
	return d, nil
}
