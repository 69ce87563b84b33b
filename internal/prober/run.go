package prober

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/action"
	"github.com/skiff-sh/skiff/internal/expansion"
)

// maxRetries is how often a probe that errors (could not run at all) is
// tried again at once, as upstream.
const maxRetries = 3

// runProbe runs a probe of the container and records the events upstream
// records: Unhealthy for a failure or an error, ProbeWarning for a
// warning. An error means the probe could not run: its result is to be
// thrown away. An urgent exec probe does not wait for an exec slot.
func (m *Manager) runProbe(ctx context.Context, kind Kind, pod *v1.Pod, c *v1.Container, spec *v1.Probe, podIP, containerID string, urgent bool) (Result, error) {
	var (
		res action.Result
		out string
		err error
	)
	for range maxRetries {
		if res, out, err = m.check(ctx, spec, c, podIP, containerID, urgent); err == nil || ctx.Err() != nil {
			break
		}
	}
	logger := klog.FromContext(ctx).WithValues("probeType", kind, "pod", klog.KObj(pod), "podUID", pod.UID, "containerName", c.Name)
	switch {
	case err != nil:
		logger.V(1).Error(err, "Probe errored")
		m.event(pod, v1.EventTypeWarning, "Unhealthy", "%s probe errored: %v", kind, err)
		return Failure, err
	case res == action.Success:
		logger.V(3).Info("Probe succeeded")
	case res == action.Warning:
		m.event(pod, v1.EventTypeWarning, "ProbeWarning", "%s probe warning: %s", kind, out)
	default:
		logger.V(1).Info("Probe failed", "output", out)
		m.event(pod, v1.EventTypeWarning, "Unhealthy", "%s probe failed: %s", kind, out)
		return Failure, nil
	}
	return Success, nil
}

// check runs one check of spec's handler. The host of HTTP and TCP checks
// defaults to podIP; gRPC checks always go to it.
func (m *Manager) check(ctx context.Context, spec *v1.Probe, c *v1.Container, podIP, containerID string, urgent bool) (action.Result, string, error) {
	timeout := seconds(spec.TimeoutSeconds)
	h := &spec.ProbeHandler
	switch {
	case h.Exec != nil:
		if !urgent {
			select {
			case m.execs <- struct{}{}:
				defer func() { <-m.execs }()
			case <-ctx.Done():
				return action.Unknown, "", ctx.Err()
			}
		}
		return action.Exec(ctx, m.cfg.Runtime, containerID, expandStatic(h.Exec.Command, c.Env), timeout)
	case h.HTTPGet != nil:
		req, err := action.NewHTTPRequest(ctx, h.HTTPGet, c, podIP, "probe")
		if err != nil {
			return action.Unknown, "", err
		}
		return m.http.Probe(req, timeout)
	case h.TCPSocket != nil:
		port, err := action.ResolvePort(h.TCPSocket.Port, c)
		if err != nil {
			return action.Unknown, "", err
		}
		host := h.TCPSocket.Host
		if host == "" {
			host = podIP
		}
		return action.TCP(ctx, host, port, timeout)
	case h.GRPC != nil:
		service := ""
		if h.GRPC.Service != nil {
			service = *h.GRPC.Service
		}
		return action.GRPC(ctx, podIP, int(h.GRPC.Port), service, timeout)
	}
	return action.Unknown, "", fmt.Errorf("missing probe handler for container %s", c.Name)
}

// expandStatic expands $(VAR) in an exec probe's command with the
// container's literal env values only, as upstream does: the probe runs
// outside the container's computed environment.
func expandStatic(cmd []string, env []v1.EnvVar) []string {
	vars := map[string]string{}
	for _, e := range env {
		if e.ValueFrom == nil {
			vars[e.Name] = e.Value
		}
	}
	out := make([]string, len(cmd))
	for i, s := range cmd {
		out[i] = expansion.Expand(s, expansion.MapLookup(vars))
	}
	return out
}

// seconds turns a probe's seconds field into a duration; 0 (unset in a
// pod that skipped defaulting) is 1 s, the API's minimum.
func seconds(s int32) time.Duration {
	return time.Duration(max(s, 1)) * time.Second
}

func (m *Manager) event(pod *v1.Pod, eventtype, reason, format string, args ...interface{}) {
	if m.cfg.Recorder != nil {
		m.cfg.Recorder.Eventf(pod, eventtype, reason, format, args...)
	}
}
