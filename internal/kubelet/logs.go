package kubelet

import (
	"context"
	"fmt"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/cri"
	"github.com/skiff-sh/skiff/internal/loglinks"
	"github.com/skiff-sh/skiff/internal/logs"
	"github.com/skiff-sh/skiff/internal/podruntime"
	"github.com/skiff-sh/skiff/internal/podspec"
)

// ContainerLog is the kubelet's logs.Source: it finds the container the
// way upstream's GetKubeletContainerLogs does, from the pod's latest
// status (the current instance, or the last terminated one), and its log
// file from the runtime.
func (k *Kubelet) ContainerLog(ctx context.Context, namespace, name, container string, previous bool) (logs.Log, error) {
	pod, ok := k.pods.byFullName(namespace + "/" + name)
	if !ok {
		return logs.Log{}, logs.NotFound("pod %q does not exist", name)
	}
	if podspec.Container(&pod.Spec, container) == nil {
		return logs.Log{}, logs.NotFound("container %q not found in pod %q", container, name)
	}
	st, ok := k.statuses.Status(pod.UID)
	if !ok {
		st = pod.Status // Skiff just started: the apiserver's copy
	}
	id, err := logContainerID(name, &st, container, previous)
	if err != nil {
		return logs.Log{}, err
	}
	resp, err := k.cri.Runtime.ContainerStatus(ctx, id, false)
	if err != nil {
		return logs.Log{}, fmt.Errorf("container %q in pod %q: %w", container, name, err)
	}
	path := resp.GetStatus().GetLogPath()
	// The runtime keeps what Skiff gave it; make sure, all the same, that
	// it is this pod's log and nothing else on the node.
	dir := podruntime.PodLogsDir(k.logsDir, pod.Namespace, pod.Name, pod.UID)
	if rel, err := filepath.Rel(dir, path); path == "" || err != nil || !filepath.IsLocal(rel) {
		return logs.Log{}, fmt.Errorf("container %q in pod %q has no log file under %s", container, name, dir)
	}
	running := func(ctx context.Context) bool {
		r, err := k.cri.Runtime.ContainerStatus(ctx, id, false)
		return err == nil && r.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING
	}
	return logs.Log{Path: path, Running: running}, nil
}

// logContainerID picks the container instance whose log to read, with
// upstream's rules and messages: previous is the last terminated
// instance; otherwise the running one, else the terminated one, else the
// last terminated; a container never started has no log.
func logContainerID(podName string, s *v1.PodStatus, name string, previous bool) (string, error) {
	var cs *v1.ContainerStatus
	for _, list := range [][]v1.ContainerStatus{s.ContainerStatuses, s.InitContainerStatuses, s.EphemeralContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				cs = &list[i]
			}
		}
	}
	if cs == nil {
		return "", fmt.Errorf("container %q in pod %q is not available", name, podName)
	}
	last := cs.LastTerminationState.Terminated
	var id string
	switch {
	case previous:
		if last == nil || last.ContainerID == "" {
			return "", fmt.Errorf("previous terminated container %q in pod %q not found", name, podName)
		}
		id = last.ContainerID
	case cs.State.Running != nil:
		id = cs.ContainerID
	case cs.State.Terminated != nil:
		id = cs.State.Terminated.ContainerID
		if id == "" && last != nil {
			id = last.ContainerID
		}
		if id == "" {
			return "", fmt.Errorf("container %q in pod %q is terminated", name, podName)
		}
	case last != nil:
		if last.ContainerID == "" {
			return "", fmt.Errorf("container %q in pod %q is terminated", name, podName)
		}
		id = last.ContainerID
	case cs.State.Waiting != nil:
		switch reason := cs.State.Waiting.Reason; reason {
		case podruntime.ReasonErrImagePull:
			return "", fmt.Errorf("container %q in pod %q is waiting to start: image can't be pulled", name, podName)
		case podruntime.ReasonImagePullBackOff:
			return "", fmt.Errorf("container %q in pod %q is waiting to start: trying and failing to pull image", name, podName)
		default:
			return "", fmt.Errorf("container %q in pod %q is waiting to start: %v", name, podName, reason)
		}
	default:
		return "", fmt.Errorf("container %q in pod %q is waiting to start - no logs yet", name, podName)
	}
	return cri.RuntimeID(id), nil
}

// runLogRotation rotates running containers' logs per the config's
// containerLogMaxSize, containerLogMaxFiles, containerLogMaxWorkers and
// containerLogMonitorInterval.
func (k *Kubelet) runLogRotation(ctx context.Context) {
	kc := k.cfg.Kubelet
	q, err := resource.ParseQuantity(kc.ContainerLogMaxSize)
	if err != nil { // validation has caught this
		klog.ErrorS(err, "No container log rotation: bad containerLogMaxSize", "containerLogMaxSize", kc.ContainerLogMaxSize)
		return
	}
	size, ok := q.AsInt64()
	if !ok || size <= 0 {
		klog.InfoS("No container log rotation", "containerLogMaxSize", kc.ContainerLogMaxSize)
		return
	}
	cfg := logs.RotateConfig{
		Runtime:  k.cri.Runtime,
		MaxSize:  size,
		MaxFiles: int(ptr.Deref(kc.ContainerLogMaxFiles, 5)),
		Workers:  int(ptr.Deref(kc.ContainerLogMaxWorkers, 1)),
	}
	if kc.ContainerLogMonitorInterval != nil {
		cfg.Interval = kc.ContainerLogMonitorInterval.Duration
	}
	logs.NewRotator(cfg).Run(ctx)
}

// reconcileLogLinks removes, at start, the log links of containers that
// went while Skiff was down and makes the missing ones of running
// containers.
func (k *Kubelet) reconcileLogLinks(ctx context.Context) {
	if k.logLinks == nil {
		return
	}
	if err := k.logLinks.Reconcile(ctx, k.cri.Runtime); err != nil && ctx.Err() == nil {
		klog.ErrorS(err, "Failed to reconcile container log links", "dir", k.logLinks.Path())
	}
}

// unlinkRemovedLog removes the log link of a container the disk-pressure
// reclaim removed.
func (k *Kubelet) unlinkRemovedLog(c *runtimeapi.Container) {
	if k.logLinks == nil {
		return
	}
	if err := k.logLinks.Unlink(loglinks.Of(c)); err != nil {
		klog.ErrorS(err, "Failed to remove a removed container's log link", "id", c.Id)
	}
}
