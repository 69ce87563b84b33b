package podstatus

import (
	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/podspec"
)

// Phase computes the pod phase from container statuses, as upstream's
// getPhase: Pending until initialized and every container has run,
// Running while any runs (or will be restarted), Succeeded or Failed once
// all have stopped for good. A running sidecar counts as running, so a pod
// whose app containers are done stays Running until its sidecars are
// stopped; a stopped sidecar does not count. initialized tells that an app
// container has been created in the current sandbox: sidecars restarting
// after that do not make the pod Pending again.
func Phase(pod *v1.Pod, initStatuses, statuses []v1.ContainerStatus, initialized bool) v1.PodPhase {
	policy := pod.Spec.RestartPolicy
	pendingInit, pendingSidecars, failedInit := 0, 0, 0
	running, waiting, stopped, succeeded, unknown := 0, 0, 0, 0, 0
	for i, c := range pod.Spec.InitContainers {
		s := initStatuses[i]
		last := s.LastTerminationState.Terminated
		if podspec.IsSidecar(&c) {
			switch {
			case s.State.Running != nil:
				if s.Started == nil || !*s.Started {
					pendingSidecars++
				}
				running++
			case s.State.Terminated != nil, s.State.Waiting != nil && last != nil:
				// A stopped sidecar does not count.
			case s.State.Waiting != nil:
				pendingSidecars++
				waiting++
			default:
				pendingSidecars++
				unknown++
			}
			continue
		}
		switch {
		case s.State.Terminated != nil && s.State.Terminated.ExitCode == 0:
		case s.State.Terminated != nil:
			failedInit++
		case s.State.Waiting != nil && last != nil:
			if last.ExitCode != 0 {
				failedInit++
			}
		default:
			pendingInit++
		}
	}
	if failedInit > 0 && policy == v1.RestartPolicyNever {
		return v1.PodFailed
	}

	for _, s := range statuses {
		switch {
		case s.State.Running != nil:
			running++
		case s.State.Terminated != nil:
			stopped++
			if s.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case s.State.Waiting != nil:
			if s.LastTerminationState.Terminated != nil {
				stopped++ // to be restarted: not succeeded, as upstream
			} else {
				waiting++
			}
		default:
			unknown++
		}
	}
	switch {
	case pendingInit > 0 || (pendingSidecars > 0 && !initialized) || waiting > 0:
		return v1.PodPending
	case running > 0 && unknown == 0:
		return v1.PodRunning
	case running == 0 && stopped > 0 && unknown == 0:
		switch {
		case policy == v1.RestartPolicyAlways:
			return v1.PodRunning
		case stopped == succeeded:
			return v1.PodSucceeded
		case policy == v1.RestartPolicyNever:
			return v1.PodFailed
		}
		return v1.PodRunning
	}
	return v1.PodPending
}

// IsTerminal reports whether a phase is final.
func IsTerminal(p v1.PodPhase) bool { return p == v1.PodSucceeded || p == v1.PodFailed }
