package podruntime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/action"
	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/cri"
)

// ReasonPostStartHook is the waiting reason of a container whose postStart
// hook failed, as upstream.
const ReasonPostStartHook = "PostStartHookError"

// hookClient makes lifecycle hooks' HTTP calls: the defaults of net/http,
// as upstream's hook runner, bounded by the hook's context.
var hookClient = &http.Client{}

// runHook runs a lifecycle handler for a container: a command through CRI
// ExecSync, an HTTP GET (which fails only when no response comes, whatever
// its status, as upstream) or a sleep. On failure it returns upstream's
// message, which may hold the command's output.
func (m *Manager) runHook(ctx context.Context, pod *v1.Pod, c *v1.Container, containerID string, h *v1.LifecycleHandler) (string, error) {
	podName := fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
	switch {
	case h.Exec != nil:
		out, err := action.RunInContainer(ctx, m.cfg.CRI.Runtime, containerID, h.Exec.Command, 0)
		if err != nil {
			return fmt.Sprintf("Exec lifecycle hook (%v) for Container %q in Pod %q failed - error: %v, message: %q", h.Exec.Command, c.Name, podName, err, out), err
		}
	case h.HTTPGet != nil:
		if err := m.runHTTPHook(ctx, pod, c, h.HTTPGet); err != nil {
			return fmt.Sprintf("HTTP lifecycle hook (%s) for Container %q in Pod %q failed - error: %v", h.HTTPGet.Path, c.Name, podName, err), err
		}
	case h.Sleep != nil:
		select {
		case <-m.cfg.Clock.After(time.Duration(h.Sleep.Seconds) * time.Second):
		case <-ctx.Done():
			err := errors.New("container terminated before sleep hook finished")
			return fmt.Sprintf("Sleep lifecycle hook (%d) for Container %q in Pod %q failed - error: %v", h.Sleep.Seconds, c.Name, podName, err), err
		}
	default:
		err := fmt.Errorf("invalid handler: %v", h)
		return fmt.Sprintf("Cannot run handler: %v", err), err
	}
	return "", nil
}

// runHTTPHook GETs an httpGet hook, whose host defaults to the pod's IP.
// An HTTPS request answered in plain HTTP is retried over HTTP, without
// its Authorization header, as upstream.
func (m *Manager) runHTTPHook(ctx context.Context, pod *v1.Pod, c *v1.Container, get *v1.HTTPGetAction) error {
	ip := ""
	if get.Host == "" {
		var err error
		if ip, err = m.podIP(ctx, pod); err != nil {
			return err
		}
	}
	req, err := action.NewHTTPRequest(ctx, get, c, ip, "lifecycle")
	if err != nil {
		return err
	}
	resp, err := hookClient.Do(req)
	discard(resp)
	var uerr *url.Error
	if errors.As(err, &uerr) && strings.Contains(uerr.Err.Error(), "server gave HTTP response to HTTPS client") {
		req = req.Clone(ctx)
		req.URL.Scheme = "http"
		req.Header.Del("Authorization")
		resp, herr := hookClient.Do(req)
		discard(resp)
		if herr == nil {
			m.event(pod, v1.EventTypeWarning, "LifecycleHTTPFallback", "request to HTTPS lifecycle hook %s got HTTP response, retry with HTTP succeeded", req.URL.Host)
			err = nil
		}
	}
	return err
}

func discard(resp *http.Response) {
	if resp != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 10<<10))
		resp.Body.Close()
	}
}

// podIP is the address hooks reach the pod at: the node's for host
// network pods, else its sandbox's.
func (m *Manager) podIP(ctx context.Context, pod *v1.Pod) (string, error) {
	if pod.Spec.HostNetwork && m.cfg.NodeIP != "" {
		return m.cfg.NodeIP, nil
	}
	st, err := m.GetPodStatus(ctx, cri.PodRef{UID: pod.UID, Name: pod.Name, Namespace: pod.Namespace})
	if err != nil {
		return "", err
	}
	if len(st.IPs) == 0 {
		return "", fmt.Errorf("failed to find networking container of pod %s/%s", pod.Namespace, pod.Name)
	}
	return st.IPs[0], nil
}

// postStart runs the container's postStart hook, if any, right after it
// started. A failed hook kills the container, which then waits with
// PostStartHookError and restarts as its policy says. It returns whether
// the container may go on.
func (m *Manager) postStart(ctx context.Context, s *podSync, c *v1.Container, id string) bool {
	if c.Lifecycle == nil || c.Lifecycle.PostStart == nil {
		return true
	}
	msg, err := m.runHook(ctx, s.pod, c, id, c.Lifecycle.PostStart)
	if err == nil {
		return true
	}
	if ctx.Err() != nil {
		return false // the pod is being stopped: that kills the container
	}
	klog.ErrorS(err, "Failed to execute PostStartHook", "pod", klog.KObj(s.pod), "podUID", s.pod.UID, "containerName", c.Name, "containerID", id)
	// The message stays out of the event: it may hold secrets.
	m.event(s.pod, v1.EventTypeWarning, "FailedPostStartHook", "PostStartHook failed")
	if err := m.killContainer(ctx, s.pod, &container.ContainerStatus{ID: id, Name: c.Name}, nil, "FailedPostStartHook"); err != nil {
		klog.ErrorS(err, "Failed to kill container after its PostStartHook failed", "pod", klog.KObj(s.pod), "containerName", c.Name)
	}
	s.res.wait(c.Name, &ContainerError{ReasonPostStartHook, msg}, 0)
	return false
}

// preStop runs the container's preStop hook, if any, for at most grace
// seconds, and returns how many seconds it took.
func (m *Manager) preStop(ctx context.Context, pod *v1.Pod, c *v1.Container, id string, grace int64) int64 {
	if c == nil || c.Lifecycle == nil || c.Lifecycle.PreStop == nil || grace <= 0 {
		return 0
	}
	began := m.cfg.Clock.Now()
	hctx, cancel := context.WithTimeout(ctx, time.Duration(grace)*time.Second)
	defer cancel()
	if _, err := m.runHook(hctx, pod, c, id, c.Lifecycle.PreStop); err != nil {
		if hctx.Err() != nil && ctx.Err() == nil {
			klog.V(2).InfoS("PreStop hook not completed in grace period", "pod", klog.KObj(pod), "containerName", c.Name, "gracePeriod", grace)
		} else {
			klog.ErrorS(err, "PreStop hook failed", "pod", klog.KObj(pod), "containerName", c.Name, "containerID", id)
			m.event(pod, v1.EventTypeWarning, "FailedPreStopHook", "PreStopHook failed")
		}
	}
	return int64(m.cfg.Clock.Since(began).Seconds())
}

// specOf finds a container's spec, init or app, by name; nil if none.
func specOf(pod *v1.Pod, name string) *v1.Container {
	if pod == nil {
		return nil
	}
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}
