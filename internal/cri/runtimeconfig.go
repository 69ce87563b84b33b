package cri

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// RuntimeConfigGetter is the CRI call that reports the runtime's own
// configuration.
type RuntimeConfigGetter interface {
	RuntimeConfig(ctx context.Context) (*runtimeapi.RuntimeConfigResponse, error)
}

// runtimeConfigTries and runtimeConfigRetry bound how long a runtime that
// is still starting gets to answer RuntimeConfig.
const runtimeConfigTries = 3

var runtimeConfigRetry = 2 * time.Second

// CgroupDriver is the cgroup driver to use: the runtime's, from CRI
// RuntimeConfig, as upstream 1.34 takes it (KubeletCgroupDriverFromCRI
// is GA), so that the kubelet and the runtime never disagree. A runtime
// that does not implement the call (containerd before 1.7) or reports no
// Linux configuration leaves the configured driver. Other errors are
// retried a few times, then returned: guessing could put pods in cgroups
// the runtime does not use.
func CgroupDriver(ctx context.Context, rt RuntimeConfigGetter, configured string) (string, error) {
	var resp *runtimeapi.RuntimeConfigResponse
	var err error
	for try := 1; try <= runtimeConfigTries; try++ {
		resp, err = rt.RuntimeConfig(ctx)
		if err == nil {
			break
		}
		if status.Code(err) == codes.Unimplemented {
			klog.InfoS("The container runtime does not report its cgroup driver (CRI RuntimeConfig is unimplemented); using cgroupDriver from the configuration", "cgroupDriver", configured)
			return configured, nil
		}
		if try == runtimeConfigTries {
			return "", fmt.Errorf("ask the container runtime for its cgroup driver: %w", err)
		}
		klog.V(2).InfoS("RuntimeConfig failed; retrying", "err", err, "try", try)
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("ask the container runtime for its cgroup driver: %w", ctx.Err())
		case <-time.After(runtimeConfigRetry):
		}
	}
	linux := resp.GetLinux()
	if linux == nil {
		klog.InfoS("The container runtime reports no Linux configuration; using cgroupDriver from the configuration", "cgroupDriver", configured)
		return configured, nil
	}
	var driver string
	switch d := linux.GetCgroupDriver(); d {
	case runtimeapi.CgroupDriver_SYSTEMD:
		driver = "systemd"
	case runtimeapi.CgroupDriver_CGROUPFS:
		driver = "cgroupfs"
	default:
		return "", fmt.Errorf("the container runtime reports an unknown cgroup driver %d", d)
	}
	if driver != configured {
		klog.InfoS("Using the container runtime's cgroup driver instead of the configured one", "cgroupDriver", driver, "configured", configured)
	} else {
		klog.InfoS("Using the container runtime's cgroup driver", "cgroupDriver", driver)
	}
	return driver, nil
}
