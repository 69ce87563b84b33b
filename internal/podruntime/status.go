package podruntime

import (
	"cmp"
	"context"
	"fmt"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/cri"
)

// GetPodStatus reads everything the runtime knows of one pod.
func (m *Manager) GetPodStatus(ctx context.Context, ref cri.PodRef) (*container.PodStatus, error) {
	rt := m.cfg.CRI.Runtime
	sel := map[string]string{cri.PodUIDLabel: string(ref.UID)}
	sandboxes, err := rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list sandboxes of pod %s: %w", ref.UID, err)
	}
	var sbs []*runtimeapi.PodSandboxStatus
	for _, s := range sandboxes {
		resp, err := rt.PodSandboxStatus(ctx, s.Id, false)
		if cri.IsNotFound(err) {
			continue // removed since listed
		}
		if err != nil {
			return nil, fmt.Errorf("status of sandbox %s: %w", s.Id, err)
		}
		sbs = append(sbs, resp.Status)
	}
	containers, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list containers of pod %s: %w", ref.UID, err)
	}
	var cs []*runtimeapi.ContainerStatus
	for _, c := range containers {
		resp, err := rt.ContainerStatus(ctx, c.Id, false)
		if cri.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("status of container %s: %w", c.Id, err)
		}
		cs = append(cs, resp.Status)
	}
	return m.PodStatusOf(ctx, ref, sbs, cs), nil
}

// PodStatusOf makes a pod's status of its sandboxes' and containers'
// runtime statuses: those GetPodStatus reads, or those the runtime sent
// with a container event, which then need no read.
func (m *Manager) PodStatusOf(ctx context.Context, ref cri.PodRef, sandboxes []*runtimeapi.PodSandboxStatus, containers []*runtimeapi.ContainerStatus) *container.PodStatus {
	st := &container.PodStatus{ID: ref.UID, Name: ref.Name, Namespace: ref.Namespace, Sandboxes: sandboxes}
	sort.SliceStable(st.Sandboxes, func(i, j int) bool {
		return st.Sandboxes[i].CreatedAt > st.Sandboxes[j].CreatedAt
	})
	if st.SandboxReady() {
		st.IPs = sandboxIPs(st.Sandboxes[0])
	}
	podDir := m.podDir(ref.UID)
	for _, s := range containers {
		cs := toContainerStatus(s)
		addTerminationMessage(ctx, podDir, s, cs)
		st.Containers = append(st.Containers, cs)
	}
	sort.SliceStable(st.Containers, func(i, j int) bool {
		return st.Containers[i].CreatedAt.After(st.Containers[j].CreatedAt)
	})
	return st
}

func sandboxIPs(s *runtimeapi.PodSandboxStatus) []string {
	if s.Network == nil || s.Network.Ip == "" {
		return nil
	}
	ips := []string{s.Network.Ip}
	for _, ip := range s.Network.AdditionalIps {
		ips = append(ips, ip.Ip)
	}
	return ips
}

func toContainerStatus(s *runtimeapi.ContainerStatus) *container.ContainerStatus {
	cs := &container.ContainerStatus{
		ID:           s.Id,
		Name:         s.GetMetadata().GetName(),
		State:        container.StateFromCRI(s.State),
		CreatedAt:    unixNano(s.CreatedAt),
		StartedAt:    unixNano(s.StartedAt),
		FinishedAt:   unixNano(s.FinishedAt),
		ExitCode:     s.ExitCode,
		Image:        s.GetImage().GetImage(),
		ImageRef:     s.ImageRef,
		ImageID:      cmp.Or(s.ImageId, s.ImageRef), // ImageId is new in CRI 1.30
		Hash:         cri.HashFromAnnotations(s.Annotations),
		RestartCount: cri.RestartCountFromAnnotations(s.Annotations),
		Reason:       s.Reason,
		Message:      s.Message,
		LogPath:      s.LogPath,
		GracePeriod:  cri.GracePeriodFromAnnotations(s.Annotations),
		Resources:    s.GetResources().GetLinux(),
	}
	// As upstream, the image is what the runtime says it runs (containerd:
	// the image's first repo tag, e.g. docker.io/library/busybox:1.35), and
	// the image ID its ImageRef (the repo digest, or the image ID without
	// one). The spec's image is the fallback for a runtime that says nothing.
	if cs.Image == "" {
		cs.Image = s.Annotations[cri.ContainerImageAnnotation]
	}
	return cs
}

func unixNano(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// ListPods returns a light view of every pod Skiff made that the runtime
// holds: IDs and states only, two CRI calls in all. PLEG relists with it.
func (m *Manager) ListPods(ctx context.Context) ([]*container.Pod, error) {
	rt := m.cfg.CRI.Runtime
	sandboxes, err := rt.ListPodSandbox(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	containers, err := rt.ListContainers(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	pods := map[types.UID]*container.Pod{}
	get := func(labels map[string]string) *container.Pod {
		ref, ok := cri.PodRefFromLabels(labels)
		if !ok {
			return nil
		}
		p := pods[ref.UID]
		if p == nil {
			p = &container.Pod{ID: ref.UID, Name: ref.Name, Namespace: ref.Namespace}
			pods[ref.UID] = p
		}
		return p
	}
	for _, s := range sandboxes {
		if p := get(s.Labels); p != nil {
			state := container.StateExited
			if s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
				state = container.StateRunning
			}
			p.Sandboxes = append(p.Sandboxes, container.Instance{ID: s.Id, State: state})
		}
	}
	for _, c := range containers {
		if p := get(c.Labels); p != nil {
			p.Containers = append(p.Containers, container.Instance{
				ID: c.Id, Name: c.GetMetadata().GetName(), State: container.StateFromCRI(c.State),
			})
		}
	}
	out := make([]*container.Pod, 0, len(pods))
	for _, p := range pods {
		out = append(out, p)
	}
	return out, nil
}
