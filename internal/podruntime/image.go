package podruntime

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/metrics"
)

// ensureImage makes the image present as the pull policy asks and returns
// its ID. Failed pulls back off (10 s doubling to 300 s) per pod and image.
func (m *Manager) ensureImage(ctx context.Context, pod *v1.Pod, image string, policy v1.PullPolicy, sandbox *runtimeapi.PodSandboxConfig) (string, *ContainerError) {
	spec := &runtimeapi.ImageSpec{Image: image}
	if policy != v1.PullAlways {
		resp, err := m.cfg.CRI.Images.ImageStatus(ctx, spec, false)
		if err != nil {
			return "", &ContainerError{ReasonErrImagePull, fmt.Sprintf("image status of %q: %v", image, err)}
		}
		if resp.Image != nil {
			if pod != nil && sandbox != nil {
				m.event(pod, v1.EventTypeNormal, "Pulled", "Container image %q already present on machine", image)
			}
			return resp.Image.Id, nil
		}
		if policy == v1.PullNever {
			msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", image)
			m.event(pod, v1.EventTypeWarning, ReasonErrImageNeverPull, "%s", msg)
			return "", &ContainerError{ReasonErrImageNeverPull, msg}
		}
	}
	key := image
	if pod != nil {
		key = string(pod.UID) + "/" + image
	}
	if m.pullBackOff.IsInBackOffSinceUpdate(key, m.pullBackOff.Clock.Now()) {
		msg := fmt.Sprintf("Back-off pulling image %q", image)
		m.event(pod, v1.EventTypeNormal, "BackOff", "%s", msg)
		return "", &ContainerError{ReasonImagePullBackOff, msg}
	}
	m.event(pod, v1.EventTypeNormal, "Pulling", "Pulling image %q", image)
	start := time.Now()
	ref, err := m.cfg.CRI.Images.PullImage(ctx, spec, nil, sandbox)
	if err != nil {
		m.pullBackOff.Next(key, m.pullBackOff.Clock.Now())
		msg := fmt.Sprintf("Failed to pull image %q: %v", image, err)
		m.event(pod, v1.EventTypeWarning, "Failed", "%s", msg)
		return "", &ContainerError{ReasonErrImagePull, msg}
	}
	m.pullBackOff.Reset(key)
	m.event(pod, v1.EventTypeNormal, "Pulled", "Successfully pulled image %q in %s", image, time.Since(start).Round(time.Millisecond))
	m.recordPull(ctx, pod, ref, start)
	return ref, nil
}

// recordPull observes a pull's duration by image size, and tells the pod
// start tracker, which leaves pull time out of the start SLI.
func (m *Manager) recordPull(ctx context.Context, pod *v1.Pod, ref string, start time.Time) {
	end := time.Now()
	var size uint64
	if st, err := m.cfg.CRI.Images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: ref}, false); err == nil && st.Image != nil {
		size = st.Image.GetSize()
	}
	metrics.ObserveImagePull(end.Sub(start).Seconds(), size)
	if pod != nil {
		metrics.PodStarts.Pulled(pod.UID, start, end)
	}
}

// event records an event about a pod; pod may be nil (sandbox image pulls).
func (m *Manager) event(pod *v1.Pod, eventtype, reason, format string, args ...interface{}) {
	if pod == nil || m.cfg.Recorder == nil {
		return
	}
	m.cfg.Recorder.Eventf(pod, eventtype, reason, format, args...)
}
