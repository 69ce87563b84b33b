package cri

import (
	"context"
	"time"

	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/metrics"
)

// instrumentedRuntime counts and times every CRI runtime call as
// kubelet_runtime_operations_* with upstream's operation_type names.
// Embedding keeps it compiling when the interface grows; a new method goes
// through uncounted until it is added here.
type instrumentedRuntime struct {
	internalapi.RuntimeService
	m *metrics.RuntimeMetrics
}

// instrumentedImages does the same for the image service.
type instrumentedImages struct {
	internalapi.ImageManagerService
	m *metrics.RuntimeMetrics
}

// observe is deferred with the start time and a pointer to the call's
// named error, so it sees the error the call returned.
func observe(m *metrics.RuntimeMetrics, op string, start time.Time, err *error) {
	m.RecordOperation(op, time.Since(start), *err)
}

func (r instrumentedRuntime) Version(ctx context.Context, v string) (_ *runtimeapi.VersionResponse, err error) {
	defer observe(r.m, "version", time.Now(), &err)
	return r.RuntimeService.Version(ctx, v)
}

func (r instrumentedRuntime) Status(ctx context.Context, verbose bool) (_ *runtimeapi.StatusResponse, err error) {
	defer observe(r.m, "status", time.Now(), &err)
	return r.RuntimeService.Status(ctx, verbose)
}

func (r instrumentedRuntime) RuntimeConfig(ctx context.Context) (_ *runtimeapi.RuntimeConfigResponse, err error) {
	defer observe(r.m, "runtime_config", time.Now(), &err)
	return r.RuntimeService.RuntimeConfig(ctx)
}

func (r instrumentedRuntime) UpdateRuntimeConfig(ctx context.Context, c *runtimeapi.RuntimeConfig) (err error) {
	defer observe(r.m, "update_runtime_config", time.Now(), &err)
	return r.RuntimeService.UpdateRuntimeConfig(ctx, c)
}

func (r instrumentedRuntime) RunPodSandbox(ctx context.Context, c *runtimeapi.PodSandboxConfig, handler string) (_ string, err error) {
	defer observe(r.m, "run_podsandbox", time.Now(), &err)
	return r.RuntimeService.RunPodSandbox(ctx, c, handler)
}

func (r instrumentedRuntime) StopPodSandbox(ctx context.Context, id string) (err error) {
	defer observe(r.m, "stop_podsandbox", time.Now(), &err)
	return r.RuntimeService.StopPodSandbox(ctx, id)
}

func (r instrumentedRuntime) RemovePodSandbox(ctx context.Context, id string) (err error) {
	defer observe(r.m, "remove_podsandbox", time.Now(), &err)
	return r.RuntimeService.RemovePodSandbox(ctx, id)
}

func (r instrumentedRuntime) PodSandboxStatus(ctx context.Context, id string, verbose bool) (_ *runtimeapi.PodSandboxStatusResponse, err error) {
	defer observe(r.m, "podsandbox_status", time.Now(), &err)
	return r.RuntimeService.PodSandboxStatus(ctx, id, verbose)
}

func (r instrumentedRuntime) ListPodSandbox(ctx context.Context, f *runtimeapi.PodSandboxFilter) (_ []*runtimeapi.PodSandbox, err error) {
	defer observe(r.m, "list_podsandbox", time.Now(), &err)
	return r.RuntimeService.ListPodSandbox(ctx, f)
}

func (r instrumentedRuntime) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (_ *runtimeapi.PortForwardResponse, err error) {
	defer observe(r.m, "port_forward", time.Now(), &err)
	return r.RuntimeService.PortForward(ctx, req)
}

func (r instrumentedRuntime) UpdatePodSandboxResources(ctx context.Context, req *runtimeapi.UpdatePodSandboxResourcesRequest) (_ *runtimeapi.UpdatePodSandboxResourcesResponse, err error) {
	defer observe(r.m, "update_podsandbox_resources", time.Now(), &err)
	return r.RuntimeService.UpdatePodSandboxResources(ctx, req)
}

func (r instrumentedRuntime) CreateContainer(ctx context.Context, sandboxID string, c *runtimeapi.ContainerConfig, sc *runtimeapi.PodSandboxConfig) (_ string, err error) {
	defer observe(r.m, "create_container", time.Now(), &err)
	return r.RuntimeService.CreateContainer(ctx, sandboxID, c, sc)
}

func (r instrumentedRuntime) StartContainer(ctx context.Context, id string) (err error) {
	defer observe(r.m, "start_container", time.Now(), &err)
	return r.RuntimeService.StartContainer(ctx, id)
}

func (r instrumentedRuntime) StopContainer(ctx context.Context, id string, timeout int64) (err error) {
	defer observe(r.m, "stop_container", time.Now(), &err)
	return r.RuntimeService.StopContainer(ctx, id, timeout)
}

func (r instrumentedRuntime) RemoveContainer(ctx context.Context, id string) (err error) {
	defer observe(r.m, "remove_container", time.Now(), &err)
	return r.RuntimeService.RemoveContainer(ctx, id)
}

func (r instrumentedRuntime) ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) (_ []*runtimeapi.Container, err error) {
	defer observe(r.m, "list_containers", time.Now(), &err)
	return r.RuntimeService.ListContainers(ctx, f)
}

func (r instrumentedRuntime) ContainerStatus(ctx context.Context, id string, verbose bool) (_ *runtimeapi.ContainerStatusResponse, err error) {
	defer observe(r.m, "container_status", time.Now(), &err)
	return r.RuntimeService.ContainerStatus(ctx, id, verbose)
}

func (r instrumentedRuntime) UpdateContainerResources(ctx context.Context, id string, res *runtimeapi.ContainerResources) (err error) {
	defer observe(r.m, "update_container", time.Now(), &err)
	return r.RuntimeService.UpdateContainerResources(ctx, id, res)
}

func (r instrumentedRuntime) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (_, _ []byte, err error) {
	defer observe(r.m, "exec_sync", time.Now(), &err)
	return r.RuntimeService.ExecSync(ctx, id, cmd, timeout)
}

func (r instrumentedRuntime) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (_ *runtimeapi.ExecResponse, err error) {
	defer observe(r.m, "exec", time.Now(), &err)
	return r.RuntimeService.Exec(ctx, req)
}

func (r instrumentedRuntime) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (_ *runtimeapi.AttachResponse, err error) {
	defer observe(r.m, "attach", time.Now(), &err)
	return r.RuntimeService.Attach(ctx, req)
}

func (r instrumentedRuntime) ReopenContainerLog(ctx context.Context, id string) (err error) {
	defer observe(r.m, "reopen_container_log", time.Now(), &err)
	return r.RuntimeService.ReopenContainerLog(ctx, id)
}

func (r instrumentedRuntime) CheckpointContainer(ctx context.Context, req *runtimeapi.CheckpointContainerRequest) (err error) {
	defer observe(r.m, "checkpoint_container", time.Now(), &err)
	return r.RuntimeService.CheckpointContainer(ctx, req)
}

func (r instrumentedRuntime) ContainerStats(ctx context.Context, id string) (_ *runtimeapi.ContainerStats, err error) {
	defer observe(r.m, "container_stats", time.Now(), &err)
	return r.RuntimeService.ContainerStats(ctx, id)
}

func (r instrumentedRuntime) ListContainerStats(ctx context.Context, f *runtimeapi.ContainerStatsFilter) (_ []*runtimeapi.ContainerStats, err error) {
	defer observe(r.m, "list_container_stats", time.Now(), &err)
	return r.RuntimeService.ListContainerStats(ctx, f)
}

func (r instrumentedRuntime) PodSandboxStats(ctx context.Context, id string) (_ *runtimeapi.PodSandboxStats, err error) {
	defer observe(r.m, "podsandbox_stats", time.Now(), &err)
	return r.RuntimeService.PodSandboxStats(ctx, id)
}

func (r instrumentedRuntime) ListPodSandboxStats(ctx context.Context, f *runtimeapi.PodSandboxStatsFilter) (_ []*runtimeapi.PodSandboxStats, err error) {
	defer observe(r.m, "list_podsandbox_stats", time.Now(), &err)
	return r.RuntimeService.ListPodSandboxStats(ctx, f)
}

func (r instrumentedRuntime) ListMetricDescriptors(ctx context.Context) (_ []*runtimeapi.MetricDescriptor, err error) {
	defer observe(r.m, "list_metric_descriptors", time.Now(), &err)
	return r.RuntimeService.ListMetricDescriptors(ctx)
}

func (r instrumentedRuntime) ListPodSandboxMetrics(ctx context.Context) (_ []*runtimeapi.PodSandboxMetrics, err error) {
	defer observe(r.m, "list_podsandbox_metrics", time.Now(), &err)
	return r.RuntimeService.ListPodSandboxMetrics(ctx)
}

func (i instrumentedImages) ListImages(ctx context.Context, f *runtimeapi.ImageFilter) (_ []*runtimeapi.Image, err error) {
	defer observe(i.m, "list_images", time.Now(), &err)
	return i.ImageManagerService.ListImages(ctx, f)
}

func (i instrumentedImages) ImageStatus(ctx context.Context, s *runtimeapi.ImageSpec, verbose bool) (_ *runtimeapi.ImageStatusResponse, err error) {
	defer observe(i.m, "image_status", time.Now(), &err)
	return i.ImageManagerService.ImageStatus(ctx, s, verbose)
}

func (i instrumentedImages) PullImage(ctx context.Context, s *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sc *runtimeapi.PodSandboxConfig) (_ string, err error) {
	defer observe(i.m, "pull_image", time.Now(), &err)
	return i.ImageManagerService.PullImage(ctx, s, auth, sc)
}

func (i instrumentedImages) RemoveImage(ctx context.Context, s *runtimeapi.ImageSpec) (err error) {
	defer observe(i.m, "remove_image", time.Now(), &err)
	return i.ImageManagerService.RemoveImage(ctx, s)
}

func (i instrumentedImages) ImageFsInfo(ctx context.Context) (_ *runtimeapi.ImageFsInfoResponse, err error) {
	defer observe(i.m, "image_fs_info", time.Now(), &err)
	return i.ImageManagerService.ImageFsInfo(ctx)
}
