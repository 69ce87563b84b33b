package cri

import (
	"context"
	"fmt"

	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// Features is what Skiff uses of the runtime's optional CRI calls, and
// what it does instead where the runtime does not answer. The cgroup
// driver (RuntimeConfig) is reported by CgroupDriver.
type Features struct {
	// Events: GetContainerEvents streams (the PLEG finds out).
	Events bool
	// SandboxStats, ContainerStats: the error of ListPodSandboxStats and
	// ListContainerStats, nil when they answer.
	SandboxStats, ContainerStats error
	// ImageFs and ContainerFs are the mountpoints ImageFsInfo reports;
	// ContainerFs is empty when the runtime reports no container
	// filesystem of its own. ImageFsErr is why ImageFsInfo failed.
	ImageFs, ContainerFs string
	ImageFsErr           error
}

// DetectFeatures asks the runtime the optional calls once each.
func DetectFeatures(ctx context.Context, rt internalapi.RuntimeService, img internalapi.ImageManagerService) Features {
	var f Features
	_, f.SandboxStats = rt.ListPodSandboxStats(ctx, &runtimeapi.PodSandboxStatsFilter{})
	_, f.ContainerStats = rt.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{})
	resp, err := img.ImageFsInfo(ctx)
	switch {
	case err != nil:
		f.ImageFsErr = err
	case len(resp.GetImageFilesystems()) == 0:
		f.ImageFsErr = fmt.Errorf("ImageFsInfo reports no image filesystem")
	default:
		f.ImageFs = resp.GetImageFilesystems()[0].GetFsId().GetMountpoint()
		if c := resp.GetContainerFilesystems(); len(c) > 0 {
			f.ContainerFs = c[0].GetFsId().GetMountpoint()
		}
	}
	return f
}

// Log logs, in one line, what the runtime offers and what Skiff falls
// back to for what it does not.
func (f Features) Log(runtime string) {
	uses := func(ok bool, yes, no string) string {
		if ok {
			return yes
		}
		return no
	}
	kv := []any{"runtime", runtime,
		"containerEvents", uses(f.Events, "GetContainerEvents, relist as a safety net", "relist only"),
		"podStats", uses(f.SandboxStats == nil, "ListPodSandboxStats, pod cgroups for pods it has no stats for", "pod cgroups"),
		"containerStats", uses(f.ContainerStats == nil, "ListContainerStats", "none (container CPU and memory missing from /stats/summary)"),
		"imageFs", uses(f.ImageFsErr == nil, f.ImageFs, "none (no imageFs in /stats/summary)"),
		"containerFs", uses(f.ContainerFs != "" && f.ContainerFs != f.ImageFs, f.ContainerFs, "the image filesystem"),
	}
	for _, e := range []struct {
		name string
		err  error
	}{{"ListPodSandboxStats", f.SandboxStats}, {"ListContainerStats", f.ContainerStats}, {"ImageFsInfo", f.ImageFsErr}} {
		if e.err != nil {
			kv = append(kv, e.name+"Error", e.err.Error())
		}
	}
	klog.InfoS("Container runtime features", kv...)
}
