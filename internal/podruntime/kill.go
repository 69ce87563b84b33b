package podruntime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/cri"
	"github.com/skiff-sh/skiff/internal/podspec"
)

// minGracePeriod is upstream's floor for stopping a container, in seconds.
const minGracePeriod = 2

// GracePeriod is how long a pod's containers get between SIGTERM and
// SIGKILL: the override if given, else the deletion grace period, else the
// spec's terminationGracePeriodSeconds; never below minGracePeriod.
func GracePeriod(pod *v1.Pod, override *int64) int64 {
	return max(gracePeriod(pod, override), minGracePeriod)
}

// gracePeriod is GracePeriod before the floor: what a preStop hook gets.
func gracePeriod(pod *v1.Pod, override *int64) int64 {
	switch {
	case override != nil:
		return *override
	case pod != nil && pod.DeletionGracePeriodSeconds != nil:
		return *pod.DeletionGracePeriodSeconds
	case pod != nil && pod.Spec.TerminationGracePeriodSeconds != nil:
		return *pod.Spec.TerminationGracePeriodSeconds
	}
	return 30
}

// KillPod stops every running container of the pod (app and init containers
// together, then sidecars in reverse order) and then its sandboxes. pod may
// be nil for pods Skiff no longer knows the spec of.
func (m *Manager) KillPod(ctx context.Context, pod *v1.Pod, st *container.PodStatus, grace *int64) error {
	sidecars := map[string]int{}
	if pod != nil {
		for i := range pod.Spec.InitContainers {
			if podspec.IsSidecar(&pod.Spec.InitContainers[i]) {
				sidecars[pod.Spec.InitContainers[i].Name] = i
			}
		}
	}
	var first, last []*container.ContainerStatus
	for _, cs := range st.Containers {
		if cs.State != container.StateRunning && cs.State != container.StateUnknown {
			continue
		}
		if _, ok := sidecars[cs.Name]; ok {
			last = append(last, cs)
		} else {
			first = append(first, cs)
		}
	}
	errs := m.killAll(ctx, pod, first, grace)
	// Sidecars stop after the app containers, one at a time, the
	// last-declared first (st.Containers is newest first: not spec order).
	sort.SliceStable(last, func(i, j int) bool { return sidecars[last[i].Name] > sidecars[last[j].Name] })
	for i := range last {
		errs = append(errs, m.killAll(ctx, pod, last[i:i+1], grace)...)
	}
	for _, sb := range st.Sandboxes {
		if err := m.cfg.CRI.Runtime.StopPodSandbox(ctx, sb.Id); err != nil && !cri.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("stop sandbox %s: %w", sb.Id, err))
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) killAll(ctx context.Context, pod *v1.Pod, cs []*container.ContainerStatus, grace *int64) []error {
	var wg sync.WaitGroup
	errs := make([]error, len(cs))
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = m.killContainer(ctx, pod, c, grace, "")
		}()
	}
	wg.Wait()
	return errs
}

// killContainer stops one container: its preStop hook, then SIGTERM, then
// SIGKILL once the grace period is over. The hook's time counts against
// the grace period; what is left goes to StopContainer, at least
// minGracePeriod. A container already gone counts as stopped.
func (m *Manager) killContainer(ctx context.Context, pod *v1.Pod, cs *container.ContainerStatus, grace *int64, why string) error {
	g := gracePeriod(pod, grace)
	if pod == nil && grace == nil && cs.GracePeriod != nil {
		g = *cs.GracePeriod
	}
	if why == "" {
		why = "Stopping container " + cs.Name
	}
	if pod != nil {
		m.event(pod, v1.EventTypeNormal, "Killing", "%s", why)
	}
	g -= m.preStop(ctx, pod, specOf(pod, cs.Name), cs.ID, g)
	g = max(g, minGracePeriod)
	klog.V(2).InfoS("Killing container", "pod", klog.KObj(pod), "container", cs.Name, "id", cs.ID, "gracePeriod", g)
	if err := m.cfg.CRI.Runtime.StopContainer(ctx, cs.ID, g); err != nil && !cri.IsNotFound(err) {
		return fmt.Errorf("stop container %s (%s): %w", cs.Name, cs.ID, err)
	}
	return nil
}

// RemovePod removes the pod's containers, sandboxes and log directory. The
// pod must have been killed first. With a SandboxRemovalDelay the
// sandboxes are queued for RunSandboxRemover instead (removal.go).
func (m *Manager) RemovePod(ctx context.Context, st *container.PodStatus) error {
	var errs []error
	for _, cs := range st.Containers {
		if err := m.cfg.CRI.Runtime.RemoveContainer(ctx, cs.ID); err != nil && !cri.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove container %s: %w", cs.ID, err))
			continue
		}
		m.unlinkLog(st.Namespace, st.Name, cs.Name, cs.ID)
	}
	for _, sb := range st.Sandboxes {
		if m.cfg.SandboxRemovalDelay > 0 {
			m.removals.add(st.ID, sb.Id, m.cfg.Clock.Now().Add(m.cfg.SandboxRemovalDelay))
			continue
		}
		if err := m.cfg.CRI.Runtime.RemovePodSandbox(ctx, sb.Id); err != nil && !cri.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove sandbox %s: %w", sb.Id, err))
		}
	}
	if st.Name != "" && len(errs) == 0 {
		if err := os.RemoveAll(PodLogsDir(m.cfg.PodLogsDir, st.Namespace, st.Name, st.ID)); err != nil {
			errs = append(errs, fmt.Errorf("remove pod logs: %w", err))
		}
	}
	return errors.Join(errs...)
}

// pruneDeadContainers keeps, per container name, the newest instance and at
// most one dead instance besides (for lastState, restart counts and
// --previous logs), as upstream's container GC does; it removes the rest.
func (m *Manager) pruneDeadContainers(ctx context.Context, pod *v1.Pod, st *container.PodStatus) {
	seen, dead := map[string]bool{}, map[string]int{}
	podDir := m.podDir(pod.UID)
	for _, cs := range st.Containers { // newest first
		newest := !seen[cs.Name]
		seen[cs.Name] = true
		if newest || cs.State == container.StateRunning || cs.State == container.StateUnknown {
			continue
		}
		if dead[cs.Name]++; dead[cs.Name] <= 1 {
			continue
		}
		if err := m.cfg.CRI.Runtime.RemoveContainer(ctx, cs.ID); err != nil && !cri.IsNotFound(err) {
			klog.ErrorS(err, "Failed to remove dead container", "pod", klog.KObj(pod), "container", cs.Name, "id", cs.ID)
			continue
		}
		removeContainerFiles(podDir, m.cfg.PodLogsDir, cs)
		m.unlinkLog(pod.Namespace, pod.Name, cs.Name, cs.ID)
	}
}
