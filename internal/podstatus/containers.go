// Package podstatus computes a pod's API status from its spec, what the runtime
// reports, and why containers wait, the way the upstream kubelet does.
package podstatus

import (
	"unicode/utf8"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/podruntime"

	"github.com/skiff-sh/skiff/internal/podspec"
)

// containerStatus is one spec container's status. defaultWaiting is the
// reason shown when it has never been created and nothing else is known.
func (in *Input) containerStatus(c *v1.Container, isInit bool, defaultWaiting string) v1.ContainerStatus {
	s := v1.ContainerStatus{Name: c.Name, Image: c.Image}
	instances := in.Runtime.Instances(c.Name)
	if len(instances) == 0 {
		s.State.Waiting = waiting(in.Waiting[c.Name], defaultWaiting)
		return s
	}
	cur := instances[0]
	s.ContainerID = in.RuntimeName + "://" + cur.ID
	s.ImageID = cur.ImageRef
	s.RestartCount = int32(cur.RestartCount)
	if cur.Image != "" {
		s.Image = cur.Image
	}
	switch cur.State {
	case container.StateRunning:
		s.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(cur.StartedAt)}
		// A running container has started once its startup probe passed,
		// and is ready once started and its readiness probe passed; a
		// regular init container is ready only once it exited 0.
		started, ready := true, true
		if in.Probes != nil {
			started = in.Probes.Started(in.Pod.UID, c.Name, cur.ID)
			ready = started && in.Probes.Ready(in.Pod.UID, c.Name, cur.ID)
		}
		s.Started = ptr(started)
		s.Ready = ready && (!isInit || podspec.IsSidecar(c))
		if len(instances) > 1 && instances[1].State == container.StateExited {
			s.LastTerminationState.Terminated = terminated(in.RuntimeName, instances[1])
		}
	case container.StateExited:
		s.Started = ptr(false)
		t := terminated(in.RuntimeName, cur)
		if w := in.Waiting[c.Name]; w != nil {
			s.State.Waiting = waiting(w, "")
			s.LastTerminationState.Terminated = t
		} else {
			s.State.Terminated = t
		}
		// A finished init container is ready: its work is done. A sidecar
		// that stopped is not.
		s.Ready = isInit && !podspec.IsSidecar(c) && s.State.Terminated != nil && cur.ExitCode == 0
	case container.StateCreated:
		// Created but never started (a runtime may keep a container whose
		// start failed as created): as upstream, it counts as exited, and
		// it could not run. containerd reports a failed start as exited
		// with its own reason, StartError, which passes through as is.
		s.Started = ptr(false)
		t := terminated(in.RuntimeName, cur)
		t.ExitCode, t.Reason = cannotRunExitCode, podruntime.ReasonContainerCannotRun
		if w := in.Waiting[c.Name]; w != nil {
			s.State.Waiting = waiting(w, "")
			s.LastTerminationState.Terminated = t
		} else {
			s.State.Terminated = t
		}
	default:
		s.Started = ptr(false)
		s.State.Waiting = waiting(in.Waiting[c.Name], podruntime.ReasonContainerCreating)
	}
	in.resources(c, &s, cur)
	return s
}

// cannotRunExitCode is the exit code of a container that never ran, as
// runtimes report a failed start.
const cannotRunExitCode = 128

// maxPodTerminationMessages is upstream's bound on the termination
// messages of all of a pod's containers together: each gets an equal
// share.
const maxPodTerminationMessages = 12 << 10

// truncateMessages cuts each terminated state's message to its share of
// maxPodTerminationMessages, keeping its beginning, as upstream's status
// manager does.
func truncateMessages(s *v1.PodStatus, containers int) {
	per := maxPodTerminationMessages
	if containers > 0 {
		per /= containers
	}
	for _, list := range [][]v1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses, s.EphemeralContainerStatuses} {
		for i := range list {
			for _, t := range []*v1.ContainerStateTerminated{list[i].State.Terminated, list[i].LastTerminationState.Terminated} {
				if t != nil && len(t.Message) > per {
					cut := per
					for cut > 0 && !utf8.RuneStart(t.Message[cut]) {
						cut-- // never half a character
					}
					t.Message = t.Message[:cut]
				}
			}
		}
	}
}

func terminated(runtimeName string, cs *container.ContainerStatus) *v1.ContainerStateTerminated {
	reason := cs.Reason
	if reason == "" {
		reason = "Error"
		if cs.ExitCode == 0 {
			reason = "Completed"
		}
	}
	return &v1.ContainerStateTerminated{
		ExitCode:    cs.ExitCode,
		Reason:      reason,
		Message:     cs.Message,
		StartedAt:   metav1.NewTime(cs.StartedAt),
		FinishedAt:  metav1.NewTime(cs.FinishedAt),
		ContainerID: runtimeName + "://" + cs.ID,
	}
}

func waiting(e *podruntime.ContainerError, fallback string) *v1.ContainerStateWaiting {
	if e == nil {
		return &v1.ContainerStateWaiting{Reason: fallback}
	}
	return &v1.ContainerStateWaiting{Reason: e.Reason, Message: e.Message}
}

func ptr[T any](v T) *T { return &v }
