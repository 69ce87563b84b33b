package podruntime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/metrics"
)

// startContainer starts a new attempt of c, whose previous attempt (if any)
// is prev, unless its crash back-off forbids it yet. It records why the
// container waits in s.res and returns whether it started.
func (m *Manager) startContainer(ctx context.Context, s *podSync, c *v1.Container, prev *container.ContainerStatus) bool {
	pod := s.pod
	var restartCount int
	if prev != nil {
		restartCount = prev.RestartCount + 1
		if prev.State != container.StateRunning && m.backingOff(s, c, prev) {
			return false
		}
	} else {
		restartCount = restartCountFromLogs(filepath.Join(s.sandboxCfg.LogDirectory, c.Name))
	}
	began := m.cfg.Clock.Now()
	imageRef, cerr := m.ensureImage(ctx, pod, c.Image, c.ImagePullPolicy, s.sandboxCfg)
	m.timed(pod, phaseImage, c.Name, began)
	if cerr != nil {
		s.res.wait(c.Name, cerr, m.pullRetryAfter(pod, c.Image))
		return false
	}
	cfg, cerr := m.containerConfig(ctx, pod, c, restartCount, imageRef, s.ips, s.volumes)
	if cerr == nil {
		cerr = m.secureContainer(ctx, pod, c, imageRef, cfg)
	}
	if cerr == nil {
		cerr = s.targetNamespace(c, cfg)
	}
	if cerr != nil {
		m.event(pod, v1.EventTypeWarning, "Failed", "Error: %s", cerr.Message)
		s.res.wait(c.Name, cerr, backOffInitial)
		return false
	}
	logDir := filepath.Join(s.sandboxCfg.LogDirectory, c.Name)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		s.res.wait(c.Name, &ContainerError{ReasonCreateContainer, fmt.Sprintf("create log directory: %v", err)}, backOffInitial)
		return false
	}
	ctype := containerType(pod, c)
	m.cfg.Metrics.Runtime.StartedContainers.WithLabelValues(ctype).Inc()
	began = m.cfg.Clock.Now()
	id, err := m.cfg.CRI.Runtime.CreateContainer(ctx, s.sandboxID, cfg, s.sandboxCfg)
	m.timed(pod, phaseCreate, c.Name, began)
	if err != nil {
		m.cfg.Metrics.Runtime.StartedContainersErrors.WithLabelValues(ctype, status.Code(err).String()).Inc()
		m.event(pod, v1.EventTypeWarning, "Failed", "Error: %v", err)
		s.res.wait(c.Name, &ContainerError{ReasonCreateContainer, err.Error()}, backOffInitial)
		return false
	}
	m.event(pod, v1.EventTypeNormal, "Created", "Created container: %s", c.Name)
	if containerType(pod, c) != metrics.ContainerTypeEphemeral {
		m.setActuated(pod, c.Name, c.Resources)
	}
	began = m.cfg.Clock.Now()
	err = m.cfg.CRI.Runtime.StartContainer(ctx, id)
	m.timed(pod, phaseStart, c.Name, began)
	if err != nil {
		m.cfg.Metrics.Runtime.StartedContainersErrors.WithLabelValues(ctype, status.Code(err).String()).Inc()
		m.event(pod, v1.EventTypeWarning, "Failed", "Error: %v", err)
		s.res.wait(c.Name, &ContainerError{ReasonRunContainer, err.Error()}, backOffInitial)
		return false
	}
	m.event(pod, v1.EventTypeNormal, "Started", "Started container %s", c.Name)
	s.res.Started = true
	m.linkLog(pod, c.Name, id, filepath.Join(s.sandboxCfg.LogDirectory, cfg.LogPath))
	if !m.postStart(ctx, s, c, id) {
		return false
	}
	klog.V(2).InfoS("Started container", "pod", klog.KObj(pod), "container", c.Name, "id", id, "restartCount", restartCount)
	return true
}

// backingOff reports whether c, whose attempt exited ended, must wait for
// its crash back-off before it runs again, and records why it waits. If
// not, the back-off grows for the next time.
func (m *Manager) backingOff(s *podSync, c *v1.Container, exited *container.ContainerStatus) bool {
	pod := s.pod
	key := backOffKey(pod, c)
	ended := exited.FinishedAt
	if ended.IsZero() {
		ended = exited.CreatedAt
	}
	if m.crashBackOff.IsInBackOffSince(key, ended) {
		delay := m.crashBackOff.Get(key)
		msg := fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", delay, c.Name, pod.Name, pod.Namespace, pod.UID)
		m.event(pod, v1.EventTypeWarning, "BackOff", "Back-off restarting failed container %s in pod %s_%s(%s)", c.Name, pod.Name, pod.Namespace, pod.UID)
		s.res.wait(c.Name, &ContainerError{ReasonCrashLoopBackOff, msg}, delay-m.cfg.Clock.Since(ended))
		return true
	}
	m.crashBackOff.Next(key, ended)
	return false
}

// backOffKey identifies a container's crash back-off, as upstream does.
func backOffKey(pod *v1.Pod, c *v1.Container) string {
	return fmt.Sprintf("%s_%s_%s_%s_%x", pod.Name, pod.Namespace, pod.UID, c.Name, HashContainer(c))
}

// containerType labels c as upstream's started-container metrics do.
func containerType(pod *v1.Pod, c *v1.Container) string {
	for i := range pod.Spec.InitContainers {
		if &pod.Spec.InitContainers[i] == c {
			return metrics.ContainerTypeInit
		}
	}
	if ephemeral(pod, c.Name) != nil {
		return metrics.ContainerTypeEphemeral
	}
	return metrics.ContainerTypeContainer
}
