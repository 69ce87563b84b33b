package podstatus

import (
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/podruntime"
	"github.com/skiff-sh/skiff/internal/qos"

	"github.com/skiff-sh/skiff/internal/podspec"
)

// Input is everything a pod's status is computed from.
type Input struct {
	Pod         *v1.Pod
	Runtime     *container.PodStatus
	Waiting     map[string]*podruntime.ContainerError
	Old         v1.PodStatus // the last status computed or reported
	RuntimeName string       // prefixes container IDs: "containerd"
	HostIPs     []string
	Now         time.Time
	// Terminating: the pod is being stopped for good (deleted), so once
	// nothing runs its phase is terminal whatever its restart policy.
	Terminating bool
	// Probes decides whether running containers have started and are
	// ready; nil: running means both.
	Probes Probes
	// Resize gives containers' resources and the resize conditions; nil:
	// none reported.
	Resize *Resize
}

// Probes gives the results of startup and readiness probes; the prober's
// Manager fits.
type Probes interface {
	// Started reports whether a running container has started (its
	// startup probe succeeded, or it has none).
	Started(podUID types.UID, container, containerID string) bool
	// Ready reports whether a running container is ready (its readiness
	// probe succeeded, or it has none).
	Ready(podUID types.UID, container, containerID string) bool
}

// Generate computes the pod's status.
func Generate(in Input) v1.PodStatus {
	pod := in.Pod
	s := v1.PodStatus{
		HostIP:             first(in.HostIPs),
		QOSClass:           qos.Class(pod),
		StartTime:          in.Old.StartTime,
		ObservedGeneration: pod.Generation,
	}
	for _, ip := range in.HostIPs {
		s.HostIPs = append(s.HostIPs, v1.HostIP{IP: ip})
	}
	if s.StartTime == nil {
		s.StartTime = &metav1.Time{Time: in.Now}
	}
	ips := in.Runtime.IPs
	if pod.Spec.HostNetwork {
		ips = in.HostIPs
	}
	if len(ips) == 0 { // a stopped pod keeps the IP it had, as upstream
		for _, ip := range in.Old.PodIPs {
			ips = append(ips, ip.IP)
		}
	}
	s.PodIP = first(ips)
	for _, ip := range ips {
		s.PodIPs = append(s.PodIPs, v1.PodIP{IP: ip})
	}

	for i := range pod.Spec.InitContainers {
		s.InitContainerStatuses = append(s.InitContainerStatuses, in.containerStatus(&pod.Spec.InitContainers[i], true, podruntime.ReasonPodInitializing))
	}
	// As upstream, a container not created yet of a pod with init
	// containers waits with PodInitializing, even once they are done.
	appWaiting := podruntime.ReasonContainerCreating
	if len(pod.Spec.InitContainers) > 0 {
		appWaiting = podruntime.ReasonPodInitializing
	}
	for i := range pod.Spec.Containers {
		s.ContainerStatuses = append(s.ContainerStatuses, in.containerStatus(&pod.Spec.Containers[i], false, appWaiting))
	}
	// Ephemeral containers count for neither phase nor conditions, and
	// are never ready (upstream's prober leaves them out).
	for i := range pod.Spec.EphemeralContainers {
		c := (*v1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		cs := in.containerStatus(c, false, podruntime.ReasonContainerCreating)
		cs.Ready = false
		s.EphemeralContainerStatuses = append(s.EphemeralContainerStatuses, cs)
	}
	truncateMessages(&s, len(pod.Spec.InitContainers)+len(pod.Spec.Containers)+len(pod.Spec.EphemeralContainers))
	s.Phase = Phase(pod, s.InitContainerStatuses, s.ContainerStatuses, appStartedInSandbox(pod, in.Runtime))
	if in.Terminating && !IsTerminal(s.Phase) && !anyRunning(s.InitContainerStatuses, s.ContainerStatuses) {
		s.Phase = terminalPhase(s.ContainerStatuses)
	}
	if IsTerminal(in.Old.Phase) {
		// A terminal phase never changes, as upstream: not back to a
		// running one, nor Succeeded to Failed when a restarted kubelet
		// stops again a pod whose containers were removed.
		s.Phase = in.Old.Phase
	}
	s.Conditions = in.conditions(s)
	return s
}

func (in *Input) conditions(s v1.PodStatus) []v1.PodCondition {
	pod := in.Pod
	terminal := IsTerminal(s.Phase)
	var conds []v1.PodCondition
	add := func(t v1.PodConditionType, ok bool, reason, msg string) {
		c := v1.PodCondition{Type: t, Status: v1.ConditionFalse, ObservedGeneration: pod.Generation}
		if ok {
			c.Status = v1.ConditionTrue
		} else {
			c.Reason, c.Message = reason, msg
		}
		c.LastTransitionTime = metav1.NewTime(in.Now)
		for _, old := range in.Old.Conditions {
			if old.Type == t && old.Status == c.Status {
				c.LastTransitionTime = old.LastTransitionTime
			}
		}
		conds = append(conds, c)
	}
	add(v1.PodReadyToStartContainers, in.Runtime.SandboxReady() && (len(in.Runtime.IPs) > 0 || pod.Spec.HostNetwork), "", "")

	var notInit []string
	for i, c := range pod.Spec.InitContainers {
		cs := s.InitContainerStatuses[i]
		done := cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0
		if podspec.IsSidecar(&c) {
			done = cs.Started != nil && *cs.Started
		}
		if !done {
			notInit = append(notInit, c.Name)
		}
	}
	// As upstream, a pod whose regular containers have run has initialized,
	// even while its init containers run again in a new sandbox.
	started := false
	for _, cs := range s.ContainerStatuses {
		started = started || cs.State.Running != nil || cs.State.Terminated != nil
	}
	add(v1.PodInitialized, len(notInit) == 0 || started || s.Phase == v1.PodSucceeded, "ContainersNotInitialized", incomplete("incomplete", notInit))
	if s.Phase == v1.PodSucceeded {
		conds[len(conds)-1].Reason = "PodCompleted" // as upstream, though True
	}

	ready, reason, msg := readiness(pod, &s)
	add(v1.ContainersReady, ready, reason, msg)
	add(v1.PodReady, ready, reason, msg)
	add(v1.PodScheduled, true, "", "")
	if in.Resize != nil && !terminal {
		for _, c := range in.Resize.Conditions {
			c.ObservedGeneration = pod.Generation
			conds = append(conds, c)
		}
	}
	sort.SliceStable(conds, func(i, j int) bool { return conditionOrder(conds[i].Type) < conditionOrder(conds[j].Type) })
	return conds
}

// readiness tells whether the pod's containers are all ready (its
// sidecars and app containers), and if not, the reason and message of its
// ContainersReady and Ready conditions.
func readiness(pod *v1.Pod, s *v1.PodStatus) (ready bool, reason, msg string) {
	var notReady []string
	for i, c := range pod.Spec.InitContainers {
		if podspec.IsSidecar(&c) && i < len(s.InitContainerStatuses) && !s.InitContainerStatuses[i].Ready {
			notReady = append(notReady, c.Name)
		}
	}
	for _, cs := range s.ContainerStatuses {
		if !cs.Ready {
			notReady = append(notReady, cs.Name)
		}
	}
	reason, msg = "ContainersNotReady", incomplete("unready", notReady)
	switch s.Phase {
	case v1.PodSucceeded:
		reason, msg = "PodCompleted", ""
	case v1.PodFailed:
		reason, msg = "PodFailed", ""
	}
	return len(notReady) == 0 && !IsTerminal(s.Phase), reason, msg
}

// conditionOrder is the order upstream reports conditions in.
func conditionOrder(t v1.PodConditionType) int {
	return map[v1.PodConditionType]int{
		v1.PodResizePending: -2, v1.PodResizeInProgress: -1,
		v1.PodReadyToStartContainers: 0, v1.PodInitialized: 1, v1.PodReady: 2,
		v1.ContainersReady: 3, v1.PodScheduled: 4,
	}[t]
}

func incomplete(what string, names []string) string {
	if len(names) == 0 {
		return ""
	}
	return fmt.Sprintf("containers with %s status: [%s]", what, strings.Join(names, " "))
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// appStartedInSandbox reports whether an app container was created in the
// pod's newest sandbox: then the pod has initialized there, as upstream's
// HasAnyActiveRegularContainerStarted says.
func appStartedInSandbox(pod *v1.Pod, rt *container.PodStatus) bool {
	if rt == nil || len(rt.Sandboxes) == 0 {
		return false
	}
	since := time.Unix(0, rt.Sandboxes[0].CreatedAt)
	for _, c := range pod.Spec.Containers {
		if cs := rt.FindContainer(c.Name); cs != nil && !cs.CreatedAt.Before(since) {
			return true
		}
	}
	return false
}

func anyRunning(lists ...[]v1.ContainerStatus) bool {
	for _, l := range lists {
		for _, cs := range l {
			if cs.State.Running != nil {
				return true
			}
		}
	}
	return false
}

// terminalPhase is the phase of a stopped pod: Succeeded when every
// container exited 0, as upstream decides for deleted pods.
func terminalPhase(statuses []v1.ContainerStatus) v1.PodPhase {
	for _, cs := range statuses {
		t := cs.State.Terminated
		if t == nil {
			t = cs.LastTerminationState.Terminated
		}
		if t == nil || t.ExitCode != 0 {
			return v1.PodFailed
		}
	}
	return v1.PodSucceeded
}
