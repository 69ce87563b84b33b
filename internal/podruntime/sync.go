package podruntime

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/cri"
	"github.com/skiff-sh/skiff/internal/podspec"
	"github.com/skiff-sh/skiff/internal/volume"
)

// SyncResult is what one sync of a pod achieved.
type SyncResult struct {
	// Waiting says, per container name, why it is not running.
	Waiting map[string]*ContainerError
	// RequeueAfter, when positive, is when a back-off ends and the pod wants
	// another sync.
	RequeueAfter time.Duration
	// Err is a failure of the sync as a whole, e.g. no sandbox.
	Err error
	// Started: a container was started, so the runtime status the sync
	// began with is stale.
	Started bool
	// ResizeErr is why resizing running containers in place failed; the
	// next sync tries again.
	ResizeErr error
	// Resized: running containers or the pod cgroup were resized in
	// place, so the runtime status the sync began with is stale.
	Resized bool
}

func (r *SyncResult) wait(name string, cerr *ContainerError, after time.Duration) {
	r.Waiting[name] = cerr
	if after > 0 && (r.RequeueAfter == 0 || after < r.RequeueAfter) {
		r.RequeueAfter = after
	}
}

// podSync carries what one SyncPod call works with.
type podSync struct {
	pod        *v1.Pod
	status     *container.PodStatus
	sandboxID  string
	sandboxCfg *runtimeapi.PodSandboxConfig
	since      time.Time // creation of the current sandbox
	ips        []string
	volumes    map[string]volume.Mounted
	res        SyncResult
}

// SyncPod drives the runtime towards the pod spec, its volumes prepared: a ready sandbox, init
// containers run to completion in order, app containers running or
// restarted as the restart policy says, with back-off.
func (m *Manager) SyncPod(ctx context.Context, pod *v1.Pod, st *container.PodStatus, volumes map[string]volume.Mounted) SyncResult {
	s := &podSync{pod: pod, status: st, volumes: volumes, res: SyncResult{Waiting: map[string]*ContainerError{}}}
	if s.appsDone() {
		// Only sidecars can still run: stop them (in reverse order) and
		// the sandbox, as upstream, so the pod reaches its final phase; no new
		// sandbox for it either.
		if err := m.KillPod(ctx, pod, s.status, nil); err != nil {
			s.res.Err = fmt.Errorf("stop pod whose containers completed: %w", err)
		}
		return s.res
	}
	if !m.ensureSandbox(ctx, s) {
		return s.res
	}
	// Before containers start, so that they fit the pod cgroup.
	m.resizeInPlace(ctx, s)
	// Before init containers, as upstream: a debug container can run
	// while an init container fails.
	m.syncEphemeralContainers(ctx, s)
	if m.syncInitContainers(ctx, s) {
		for i := range pod.Spec.Containers {
			m.syncAppContainer(ctx, s, &pod.Spec.Containers[i])
		}
	}
	m.pruneDeadContainers(ctx, pod, st)
	return s.res
}

// ensureSandbox finds the ready sandbox or makes a new one, killing what ran
// in a dead one. It returns false when containers cannot be started now.
func (m *Manager) ensureSandbox(ctx context.Context, s *podSync) bool {
	st := s.status
	if st.SandboxReady() {
		sb := st.Sandboxes[0]
		s.sandboxID, s.ips = sb.Id, st.IPs
		s.since = time.Unix(0, sb.CreatedAt)
		s.sandboxCfg = m.sandboxConfig(s.pod, sb.GetMetadata().GetAttempt())
		return true
	}
	var attempt uint32
	if len(st.Sandboxes) > 0 {
		if s.pod.Spec.RestartPolicy == v1.RestartPolicyNever && len(st.Containers) > 0 {
			return false // it ran once and may not run again
		}
		attempt = st.Sandboxes[0].GetMetadata().GetAttempt() + 1
		klog.InfoS("Pod sandbox is not ready, creating a new one", "pod", klog.KObj(s.pod), "sandbox", st.Sandboxes[0].Id)
		if err := m.KillPod(ctx, s.pod, st, nil); err != nil {
			s.res.Err = fmt.Errorf("kill pod before new sandbox: %w", err)
			return false
		}
	}
	began := m.cfg.Clock.Now()
	id, ips, err := m.createSandbox(ctx, s.pod, attempt)
	m.timed(s.pod, phaseSandbox, "", began)
	if err != nil {
		m.event(s.pod, v1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", err)
		s.res.Err = fmt.Errorf("create sandbox of pod %s/%s: %w", s.pod.Namespace, s.pod.Name, err)
		if id != "" { // made but unusable: remove it so the next sync starts clean
			s.res.Err = errors.Join(s.res.Err, m.discardSandbox(ctx, id))
		}
		return false
	}
	s.sandboxID, s.ips, s.since = id, ips, m.cfg.Clock.Now().Add(-time.Second)
	s.sandboxCfg = m.sandboxConfig(s.pod, attempt)
	// What ran in the old sandbox is history: init containers run again.
	s.status = &container.PodStatus{ID: st.ID, Name: st.Name, Namespace: st.Namespace, Containers: st.Containers}
	return true
}

// discardSandbox stops and removes a sandbox made but unusable. A sandbox
// already gone is no error; any other failure is returned, to be joined
// to the error that made the sandbox unusable.
func (m *Manager) discardSandbox(ctx context.Context, id string) error {
	var errs []error
	if err := m.cfg.CRI.Runtime.StopPodSandbox(ctx, id); err != nil && !cri.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("roll back: stop sandbox %s: %w", id, err))
	}
	if err := m.cfg.CRI.Runtime.RemovePodSandbox(ctx, id); err != nil && !cri.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("roll back: remove sandbox %s: %w", id, err))
	}
	return errors.Join(errs...)
}

// syncInitContainers runs init containers one at a time and starts sidecars
// in order, each once the one before it has started (a sidecar: is running
// and its startup probe, if any, succeeded). It returns true once all are
// done. After initialization (an app container exists in the current
// sandbox) only sidecars are kept running: regular init containers never
// run again there, and a sidecar in back-off holds nothing up.
func (m *Manager) syncInitContainers(ctx context.Context, s *podSync) bool {
	initialized := s.appStarted()
	for i := range s.pod.Spec.InitContainers {
		c := &s.pod.Spec.InitContainers[i]
		cs := s.current(c.Name)
		if podspec.IsSidecar(c) {
			switch {
			case cs != nil && cs.State == container.StateRunning:
				if m.restartUnhealthy(ctx, s, c, cs) || m.resizeRestart(ctx, s, c, cs) {
					if !initialized && c.StartupProbe != nil {
						return false
					}
					continue
				}
				if !initialized && !m.started(c, cs) {
					return false
				}
			case m.startContainer(ctx, s, c, s.status.FindContainer(c.Name)):
				// Without a startup probe, running is started: go on.
				if !initialized && c.StartupProbe != nil {
					return false
				}
			case !initialized:
				return false
			}
			continue
		}
		if initialized {
			continue
		}
		switch {
		case cs == nil:
			m.startContainer(ctx, s, c, s.status.FindContainer(c.Name))
			return false
		case cs.State == container.StateRunning:
			return false
		case cs.State == container.StateExited && cs.ExitCode == 0:
			continue
		case s.pod.Spec.RestartPolicy == v1.RestartPolicyNever && cs.State == container.StateExited:
			return false // the pod has failed
		default:
			m.startContainer(ctx, s, c, cs)
			return false
		}
	}
	return true
}

// started reports whether a running sidecar counts as started. Until a
// prober reports startup results, a running container has started.
func (m *Manager) started(c *v1.Container, cs *container.ContainerStatus) bool {
	if c.StartupProbe == nil || m.cfg.StartupDone == nil {
		return true
	}
	return m.cfg.StartupDone(cs.ID)
}

// appsDone reports whether a pod that does not restart everything has
// nothing left to run: every app container exited and may not restart.
// Upstream then kills the pod, sidecars included, so it can complete.
func (s *podSync) appsDone() bool {
	if s.pod.Spec.RestartPolicy == v1.RestartPolicyAlways || len(s.pod.Spec.Containers) == 0 {
		return false
	}
	for _, c := range s.pod.Spec.Containers {
		cs := s.status.FindContainer(c.Name)
		if cs == nil || cs.State != container.StateExited || shouldRestart(s.pod.Spec.RestartPolicy, cs.ExitCode) {
			return false
		}
	}
	return true
}

// appStarted reports whether an app container was created in the current
// sandbox: the pod has initialized there.
func (s *podSync) appStarted() bool {
	for _, c := range s.pod.Spec.Containers {
		if s.current(c.Name) != nil {
			return true
		}
	}
	return false
}

func (m *Manager) syncAppContainer(ctx context.Context, s *podSync, c *v1.Container) {
	cs := s.status.FindContainer(c.Name)
	switch {
	case cs == nil:
		m.startContainer(ctx, s, c, nil)
	case cs.State == container.StateRunning:
		if cs.Hash == HashContainer(c) {
			if !m.restartUnhealthy(ctx, s, c, cs) {
				m.resizeRestart(ctx, s, c, cs)
			}
			return
		}
		msg := fmt.Sprintf("Container %s definition changed, will be restarted", c.Name)
		if err := m.killContainer(ctx, s.pod, cs, nil, msg); err != nil {
			s.res.Err = err
			return
		}
		m.startContainer(ctx, s, c, cs)
	case cs.State == container.StateExited && !shouldRestart(s.pod.Spec.RestartPolicy, cs.ExitCode):
		return
	default:
		m.startContainer(ctx, s, c, cs)
	}
}

// restartUnhealthy kills a running container that failed its liveness or
// startup probe and, unless the pod never restarts containers, starts it
// again, as upstream: at once, unless the attempt before it ended within
// its crash back-off (a container failing its probes again and again ends
// in CrashLoopBackOff). It returns whether it acted.
func (m *Manager) restartUnhealthy(ctx context.Context, s *podSync, c *v1.Container, cs *container.ContainerStatus) bool {
	if m.cfg.Unhealthy == nil {
		return false
	}
	kind, failed := m.cfg.Unhealthy(cs.ID)
	if !failed {
		return false
	}
	restart := podspec.IsSidecar(c) || s.pod.Spec.RestartPolicy != v1.RestartPolicyNever
	msg := fmt.Sprintf("Container %s failed %s probe", c.Name, kind)
	if restart {
		msg += ", will be restarted"
	}
	if err := m.killContainer(ctx, s.pod, cs, probeGracePeriod(s.pod, c, kind), msg); err != nil {
		s.res.Err = err
		return true
	}
	s.res.Started = true // the status the sync began with is stale
	if !restart {
		return true
	}
	if older := s.status.Instances(c.Name); len(older) > 1 && older[1].State == container.StateExited && m.backingOff(s, c, older[1]) {
		return true // the next sync restarts it once the back-off is over
	}
	m.startContainer(ctx, s, c, cs)
	return true
}

// probeGracePeriod is the grace period of a kill for a failed probe: the
// probe's own terminationGracePeriodSeconds, unless the pod is being
// deleted; nil: the pod's.
func probeGracePeriod(pod *v1.Pod, c *v1.Container, kind string) *int64 {
	p := c.LivenessProbe
	if kind == "startup" {
		p = c.StartupProbe
	}
	if pod.DeletionGracePeriodSeconds != nil || p == nil {
		return nil
	}
	return p.TerminationGracePeriodSeconds
}

// current returns the newest instance of a container in the current sandbox.
func (s *podSync) current(name string) *container.ContainerStatus {
	cs := s.status.FindContainer(name)
	if cs == nil || cs.CreatedAt.Before(s.since) {
		return nil
	}
	return cs
}

func shouldRestart(policy v1.RestartPolicy, exitCode int32) bool {
	switch policy {
	case v1.RestartPolicyNever:
		return false
	case v1.RestartPolicyOnFailure:
		return exitCode != 0
	}
	return true
}
