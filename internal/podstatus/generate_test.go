package podstatus_test

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/podruntime"
	"github.com/skiff-sh/skiff/internal/podstatus"
)

var (
	tNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	tOld = tNow.Add(-time.Hour)
)

// genPod is a pod with the given restart policy, init containers and app
// containers (by name; a name ending in "+" is a sidecar init container).
func genPod(policy v1.RestartPolicy, inits []string, apps ...string) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1", Generation: 3},
		Spec:       v1.PodSpec{RestartPolicy: policy},
	}
	for _, n := range inits {
		c := v1.Container{Name: n, Image: "img-" + n}
		if n[len(n)-1] == '+' {
			c.Name = n[:len(n)-1]
			c.RestartPolicy = ptrTo(v1.ContainerRestartPolicyAlways)
		}
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
	}
	for _, n := range apps {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: n, Image: "img-" + n})
	}
	return pod
}

// rt is a runtime status: a ready sandbox with an IP unless noSandbox, and
// the given container instances (newest first).
func rt(cs ...*container.ContainerStatus) *container.PodStatus {
	return &container.PodStatus{
		ID: "uid-1", Name: "p", Namespace: "ns", IPs: []string{"10.88.0.5"},
		Sandboxes:  []*runtimeapi.PodSandboxStatus{{Id: "sb", State: runtimeapi.PodSandboxState_SANDBOX_READY}},
		Containers: cs,
	}
}

func noSandbox(cs ...*container.ContainerStatus) *container.PodStatus {
	st := rt(cs...)
	st.IPs, st.Sandboxes = nil, nil
	return st
}

// inst is one container instance; restarts is its restart count.
func inst(name, id string, state container.State, exit int32, restarts int) *container.ContainerStatus {
	c := &container.ContainerStatus{
		ID: id, Name: name, State: state, ExitCode: exit, RestartCount: restarts,
		Image: "img-" + name, ImageRef: "sha256:" + name,
		CreatedAt: tOld, StartedAt: tOld.Add(time.Second),
	}
	if state == container.StateExited {
		c.FinishedAt = tOld.Add(time.Minute)
	}
	return c
}

func stateString(s v1.ContainerState) string {
	switch {
	case s.Waiting != nil:
		if s.Waiting.Message != "" {
			return fmt.Sprintf("waiting(%s: %s)", s.Waiting.Reason, s.Waiting.Message)
		}
		return fmt.Sprintf("waiting(%s)", s.Waiting.Reason)
	case s.Running != nil:
		return "running"
	case s.Terminated != nil:
		return fmt.Sprintf("terminated(%d %s %s)", s.Terminated.ExitCode, s.Terminated.Reason, s.Terminated.ContainerID)
	}
	return "-"
}

// summary renders the parts of a container status the tests compare.
func summary(cs v1.ContainerStatus) string {
	s := fmt.Sprintf("%s %s", cs.Name, stateString(cs.State))
	if last := stateString(cs.LastTerminationState); last != "-" {
		s += " last=" + last
	}
	if cs.Ready {
		s += " ready"
	}
	if cs.RestartCount > 0 {
		s += fmt.Sprintf(" restarts=%d", cs.RestartCount)
	}
	return s
}

func summaries(css []v1.ContainerStatus) []string {
	out := []string{}
	for _, cs := range css {
		out = append(out, summary(cs))
	}
	return out
}

// cond renders a condition as "Type=Status[/Reason[/Message]]".
func cond(c v1.PodCondition) string {
	s := fmt.Sprintf("%s=%s", c.Type, c.Status)
	if c.Reason != "" || c.Message != "" {
		s += "/" + c.Reason
	}
	if c.Message != "" {
		s += "/" + c.Message
	}
	return s
}

func conds(cs []v1.PodCondition) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, cond(c))
	}
	return out
}

func generate(pod *v1.Pod, st *container.PodStatus, waiting map[string]*podruntime.ContainerError, old v1.PodStatus) v1.PodStatus {
	return podstatus.Generate(podstatus.Input{
		Pod: pod, Runtime: st, Waiting: waiting, Old: old,
		RuntimeName: "containerd", HostIPs: []string{"192.168.1.10"}, Now: tNow,
	})
}

const (
	stRunning = container.StateRunning
	stExited  = container.StateExited
)

func TestGenerate(t *testing.T) {
	crashLoop := &podruntime.ContainerError{Reason: podruntime.ReasonCrashLoopBackOff, Message: "back-off 40s restarting failed container=a"}
	tests := []struct {
		name     string
		pod      *v1.Pod
		rt       *container.PodStatus
		waiting  map[string]*podruntime.ContainerError
		old      v1.PodStatus
		phase    v1.PodPhase
		init     []string
		apps     []string
		wantCond []string
	}{
		{
			name:  "nothing created yet",
			pod:   genPod(v1.RestartPolicyAlways, nil, "a", "b"),
			rt:    noSandbox(),
			phase: v1.PodPending,
			init:  []string{},
			apps:  []string{"a waiting(ContainerCreating)", "b waiting(ContainerCreating)"},
			wantCond: []string{
				"PodReadyToStartContainers=False",
				"Initialized=True",
				"Ready=False/ContainersNotReady/containers with unready status: [a b]",
				"ContainersReady=False/ContainersNotReady/containers with unready status: [a b]",
				"PodScheduled=True",
			},
		},
		{
			name:    "never created, with a reason to wait",
			pod:     genPod(v1.RestartPolicyAlways, nil, "a"),
			rt:      rt(),
			waiting: map[string]*podruntime.ContainerError{"a": {Reason: podruntime.ReasonErrImagePull, Message: "not found"}},
			phase:   v1.PodPending,
			init:    []string{},
			apps:    []string{"a waiting(ErrImagePull: not found)"},
			wantCond: []string{
				"PodReadyToStartContainers=True",
				"Initialized=True",
				"Ready=False/ContainersNotReady/containers with unready status: [a]",
				"ContainersReady=False/ContainersNotReady/containers with unready status: [a]",
				"PodScheduled=True",
			},
		},
		{
			name:  "all running",
			pod:   genPod(v1.RestartPolicyAlways, nil, "a", "b"),
			rt:    rt(inst("a", "a1", stRunning, 0, 0), inst("b", "b1", stRunning, 0, 0)),
			phase: v1.PodRunning,
			init:  []string{},
			apps:  []string{"a running ready", "b running ready"},
			wantCond: []string{
				"PodReadyToStartContainers=True", "Initialized=True", "Ready=True", "ContainersReady=True", "PodScheduled=True",
			},
		},
		{
			name:  "one running, one still being created",
			pod:   genPod(v1.RestartPolicyAlways, nil, "a", "b"),
			rt:    rt(inst("a", "a1", stRunning, 0, 0)),
			phase: v1.PodPending,
			init:  []string{},
			apps:  []string{"a running ready", "b waiting(ContainerCreating)"},
			wantCond: []string{
				"PodReadyToStartContainers=True", "Initialized=True",
				"Ready=False/ContainersNotReady/containers with unready status: [b]",
				"ContainersReady=False/ContainersNotReady/containers with unready status: [b]",
				"PodScheduled=True",
			},
		},
		{
			name:  "first init container running",
			pod:   genPod(v1.RestartPolicyAlways, []string{"i1", "i2"}, "a"),
			rt:    rt(inst("i1", "i1-1", stRunning, 0, 0)),
			phase: v1.PodPending,
			// A running (non-sidecar) init container is not ready: upstream
			// marks init containers ready only once they exit 0.
			init: []string{"i1 running", "i2 waiting(PodInitializing)"},
			apps: []string{"a waiting(PodInitializing)"},
			wantCond: []string{
				"PodReadyToStartContainers=True",
				"Initialized=False/ContainersNotInitialized/containers with incomplete status: [i1 i2]",
				"Ready=False/ContainersNotReady/containers with unready status: [a]",
				"ContainersReady=False/ContainersNotReady/containers with unready status: [a]",
				"PodScheduled=True",
			},
		},
		{
			name:  "init containers done, app container not created yet",
			pod:   genPod(v1.RestartPolicyAlways, []string{"i1", "i2"}, "a"),
			rt:    rt(inst("i2", "i2-1", stExited, 0, 0), inst("i1", "i1-1", stExited, 0, 0)),
			phase: v1.PodPending,
			init: []string{
				"i1 terminated(0 Completed containerd://i1-1) ready",
				"i2 terminated(0 Completed containerd://i2-1) ready",
			},
			// Upstream's default waiting reason for every container of a
			// pod with init containers is PodInitializing.
			apps: []string{"a waiting(PodInitializing)"},
			wantCond: []string{
				"PodReadyToStartContainers=True", "Initialized=True",
				"Ready=False/ContainersNotReady/containers with unready status: [a]",
				"ContainersReady=False/ContainersNotReady/containers with unready status: [a]",
				"PodScheduled=True",
			},
		},
		{
			name: "init container crash looping",
			pod:  genPod(v1.RestartPolicyAlways, []string{"i1"}, "a"),
			rt:   rt(inst("i1", "i1-2", stExited, 1, 1), inst("i1", "i1-1", stExited, 1, 0)),
			waiting: map[string]*podruntime.ContainerError{
				"i1": {Reason: podruntime.ReasonCrashLoopBackOff, Message: "back-off"},
			},
			phase: v1.PodPending,
			init:  []string{"i1 waiting(CrashLoopBackOff: back-off) last=terminated(1 Error containerd://i1-2) restarts=1"},
			apps:  []string{"a waiting(PodInitializing)"},
			wantCond: []string{
				"PodReadyToStartContainers=True",
				"Initialized=False/ContainersNotInitialized/containers with incomplete status: [i1]",
				"Ready=False/ContainersNotReady/containers with unready status: [a]",
				"ContainersReady=False/ContainersNotReady/containers with unready status: [a]",
				"PodScheduled=True",
			},
		},
		{
			name:  "init container failed, restartPolicy Never",
			pod:   genPod(v1.RestartPolicyNever, []string{"i1", "i2"}, "a"),
			rt:    rt(inst("i1", "i1-1", stExited, 2, 0)),
			phase: v1.PodFailed,
			init:  []string{"i1 terminated(2 Error containerd://i1-1)", "i2 waiting(PodInitializing)"},
			apps:  []string{"a waiting(PodInitializing)"},
			wantCond: []string{
				"PodReadyToStartContainers=True",
				"Initialized=False/ContainersNotInitialized/containers with incomplete status: [i1 i2]",
				"Ready=False/PodFailed",
				"ContainersReady=False/PodFailed",
				"PodScheduled=True",
			},
		},
		{
			name:  "succeeded, restartPolicy Never",
			pod:   genPod(v1.RestartPolicyNever, []string{"i1"}, "a", "b"),
			rt:    noSandbox(inst("b", "b1", stExited, 0, 0), inst("a", "a1", stExited, 0, 0), inst("i1", "i1-1", stExited, 0, 0)),
			phase: v1.PodSucceeded,
			init:  []string{"i1 terminated(0 Completed containerd://i1-1) ready"},
			apps:  []string{"a terminated(0 Completed containerd://a1)", "b terminated(0 Completed containerd://b1)"},
			wantCond: []string{
				"PodReadyToStartContainers=False",
				"Initialized=True/PodCompleted",
				"Ready=False/PodCompleted",
				"ContainersReady=False/PodCompleted",
				"PodScheduled=True",
			},
		},
		{
			name:  "succeeded, restartPolicy OnFailure",
			pod:   genPod(v1.RestartPolicyOnFailure, nil, "a"),
			rt:    rt(inst("a", "a1", stExited, 0, 0)),
			phase: v1.PodSucceeded,
			init:  []string{},
			apps:  []string{"a terminated(0 Completed containerd://a1)"},
			wantCond: []string{
				"PodReadyToStartContainers=True",
				"Initialized=True/PodCompleted",
				"Ready=False/PodCompleted",
				"ContainersReady=False/PodCompleted",
				"PodScheduled=True",
			},
		},
		{
			name:  "failed, restartPolicy Never",
			pod:   genPod(v1.RestartPolicyNever, nil, "a", "b"),
			rt:    rt(inst("b", "b1", stExited, 137, 0), inst("a", "a1", stExited, 0, 0)),
			phase: v1.PodFailed,
			init:  []string{},
			apps:  []string{"a terminated(0 Completed containerd://a1)", "b terminated(137 Error containerd://b1)"},
			wantCond: []string{
				"PodReadyToStartContainers=True",
				"Initialized=True",
				"Ready=False/PodFailed",
				"ContainersReady=False/PodFailed",
				"PodScheduled=True",
			},
		},
		{
			name:  "restartPolicy Always with everything exited stays Running",
			pod:   genPod(v1.RestartPolicyAlways, nil, "a", "b"),
			rt:    rt(inst("b", "b1", stExited, 1, 0), inst("a", "a1", stExited, 0, 0)),
			phase: v1.PodRunning,
			init:  []string{},
			apps:  []string{"a terminated(0 Completed containerd://a1)", "b terminated(1 Error containerd://b1)"},
			wantCond: []string{
				"PodReadyToStartContainers=True", "Initialized=True",
				"Ready=False/ContainersNotReady/containers with unready status: [a b]",
				"ContainersReady=False/ContainersNotReady/containers with unready status: [a b]",
				"PodScheduled=True",
			},
		},
		{
			name:    "crash loop back-off",
			pod:     genPod(v1.RestartPolicyAlways, nil, "a"),
			rt:      rt(inst("a", "a4", stExited, 1, 3), inst("a", "a3", stExited, 1, 2)),
			waiting: map[string]*podruntime.ContainerError{"a": crashLoop},
			phase:   v1.PodRunning,
			init:    []string{},
			apps:    []string{"a waiting(CrashLoopBackOff: back-off 40s restarting failed container=a) last=terminated(1 Error containerd://a4) restarts=3"},
			wantCond: []string{
				"PodReadyToStartContainers=True", "Initialized=True",
				"Ready=False/ContainersNotReady/containers with unready status: [a]",
				"ContainersReady=False/ContainersNotReady/containers with unready status: [a]",
				"PodScheduled=True",
			},
		},
		{
			name: "crash looping with restartPolicy OnFailure",
			pod:  genPod(v1.RestartPolicyOnFailure, nil, "a", "b"),
			rt:   rt(inst("b", "b1", stExited, 0, 0), inst("a", "a2", stExited, 1, 1), inst("a", "a1", stExited, 1, 0)),
			waiting: map[string]*podruntime.ContainerError{
				"a": crashLoop,
			},
			phase: v1.PodRunning,
			init:  []string{},
			apps: []string{
				"a waiting(CrashLoopBackOff: back-off 40s restarting failed container=a) last=terminated(1 Error containerd://a2) restarts=1",
				"b terminated(0 Completed containerd://b1)",
			},
			wantCond: []string{
				"PodReadyToStartContainers=True", "Initialized=True",
				"Ready=False/ContainersNotReady/containers with unready status: [a b]",
				"ContainersReady=False/ContainersNotReady/containers with unready status: [a b]",
				"PodScheduled=True",
			},
		},
		{
			name:  "running after restarts: last state from the previous instance",
			pod:   genPod(v1.RestartPolicyAlways, nil, "a"),
			rt:    rt(inst("a", "a3", stRunning, 0, 2), inst("a", "a2", stExited, 137, 1), inst("a", "a1", stExited, 1, 0)),
			phase: v1.PodRunning,
			init:  []string{},
			apps:  []string{"a running last=terminated(137 Error containerd://a2) ready restarts=2"},
			wantCond: []string{
				"PodReadyToStartContainers=True", "Initialized=True", "Ready=True", "ContainersReady=True", "PodScheduled=True",
			},
		},
		{
			name:  "sidecar running with the app",
			pod:   genPod(v1.RestartPolicyAlways, []string{"i1", "sc+"}, "a"),
			rt:    rt(inst("a", "a1", stRunning, 0, 0), inst("sc", "sc1", stRunning, 0, 0), inst("i1", "i1-1", stExited, 0, 0)),
			phase: v1.PodRunning,
			init:  []string{"i1 terminated(0 Completed containerd://i1-1) ready", "sc running ready"},
			apps:  []string{"a running ready"},
			wantCond: []string{
				"PodReadyToStartContainers=True", "Initialized=True", "Ready=True", "ContainersReady=True", "PodScheduled=True",
			},
		},
		{
			name:  "sidecar exited 0 and not restarted yet is not ready",
			pod:   genPod(v1.RestartPolicyAlways, []string{"sc+"}, "a"),
			rt:    rt(inst("a", "a1", stRunning, 0, 0), inst("sc", "sc1", stExited, 0, 0)),
			phase: v1.PodRunning,
			init:  []string{"sc terminated(0 Completed containerd://sc1)"},
			apps:  []string{"a running ready"},
			wantCond: []string{
				"PodReadyToStartContainers=True",
				// A regular container has started: the pod has initialized.
				"Initialized=True",
				"Ready=False/ContainersNotReady/containers with unready status: [sc]",
				"ContainersReady=False/ContainersNotReady/containers with unready status: [sc]",
				"PodScheduled=True",
			},
		},
		{
			name: "sandbox re-created: init containers run again, the pod stays initialized",
			pod:  genPod(v1.RestartPolicyAlways, []string{"i1"}, "a"),
			rt: rt(
				inst("i1", "i1-2", stRunning, 0, 1), // newest: re-running in the new sandbox
				inst("a", "a1", stExited, 137, 0),
				inst("i1", "i1-1", stExited, 0, 0),
			),
			phase: v1.PodPending,
			init:  []string{"i1 running last=terminated(0 Completed containerd://i1-1) restarts=1"},
			apps:  []string{"a terminated(137 Error containerd://a1)"},
			wantCond: []string{
				"PodReadyToStartContainers=True", "Initialized=True",
				"Ready=False/ContainersNotReady/containers with unready status: [a]",
				"ContainersReady=False/ContainersNotReady/containers with unready status: [a]",
				"PodScheduled=True",
			},
		},
		{
			name:  "terminal phase never regresses: Failed stays Failed",
			pod:   genPod(v1.RestartPolicyAlways, nil, "a"),
			rt:    rt(inst("a", "a2", stRunning, 0, 1)),
			old:   v1.PodStatus{Phase: v1.PodFailed},
			phase: v1.PodFailed,
			init:  []string{},
			apps:  []string{"a running ready restarts=1"},
			wantCond: []string{
				"PodReadyToStartContainers=True", "Initialized=True",
				"Ready=False/PodFailed", "ContainersReady=False/PodFailed", "PodScheduled=True",
			},
		},
		{
			name:  "terminal phase never regresses: Succeeded stays Succeeded",
			pod:   genPod(v1.RestartPolicyOnFailure, nil, "a"),
			rt:    noSandbox(),
			old:   v1.PodStatus{Phase: v1.PodSucceeded},
			phase: v1.PodSucceeded,
			init:  []string{},
			apps:  []string{"a waiting(ContainerCreating)"},
			wantCond: []string{
				"PodReadyToStartContainers=False", "Initialized=True/PodCompleted",
				"Ready=False/PodCompleted", "ContainersReady=False/PodCompleted", "PodScheduled=True",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := generate(tt.pod, tt.rt, tt.waiting, tt.old)
			if s.Phase != tt.phase {
				t.Errorf("phase = %s, want %s", s.Phase, tt.phase)
			}
			if got := summaries(s.InitContainerStatuses); !reflect.DeepEqual(got, tt.init) {
				t.Errorf("init container statuses:\n got %q\nwant %q", got, tt.init)
			}
			if got := summaries(s.ContainerStatuses); !reflect.DeepEqual(got, tt.apps) {
				t.Errorf("container statuses:\n got %q\nwant %q", got, tt.apps)
			}
			if got := conds(s.Conditions); !reflect.DeepEqual(got, tt.wantCond) {
				t.Errorf("conditions:\n got %q\nwant %q", got, tt.wantCond)
			}
			for _, c := range s.Conditions {
				if c.ObservedGeneration != tt.pod.Generation {
					t.Errorf("condition %s observedGeneration = %d, want %d", c.Type, c.ObservedGeneration, tt.pod.Generation)
				}
			}
			if s.ObservedGeneration != tt.pod.Generation {
				t.Errorf("observedGeneration = %d, want %d", s.ObservedGeneration, tt.pod.Generation)
			}
		})
	}
}

func TestGenerateContainerFields(t *testing.T) {
	pod := genPod(v1.RestartPolicyAlways, nil, "a", "b")
	a := inst("a", "abc123", stRunning, 0, 4)
	a.Image = "docker.io/library/img-a:latest"
	prev := inst("a", "old1", stExited, 2, 3)
	prev.Reason, prev.Message = "OOMKilled", "out of memory"
	s := generate(pod, rt(a, prev), nil, v1.PodStatus{})

	got := s.ContainerStatuses[0]
	want := v1.ContainerStatus{
		Name:        "a",
		Image:       "docker.io/library/img-a:latest", // as the runtime reports it
		ImageID:     "sha256:a",
		ContainerID: "containerd://abc123",
		State:       v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(a.StartedAt)}},
		LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
			ExitCode: 2, Reason: "OOMKilled", Message: "out of memory",
			StartedAt: metav1.NewTime(prev.StartedAt), FinishedAt: metav1.NewTime(prev.FinishedAt),
			ContainerID: "containerd://old1",
		}},
		Ready:        true,
		RestartCount: 4,
		Started:      ptrTo(true),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("status of a:\n got %+v\nwant %+v", got, want)
	}
	// b never ran: the spec's image, no ID.
	if b := s.ContainerStatuses[1]; b.Image != "img-b" || b.ContainerID != "" || b.ImageID != "" || b.RestartCount != 0 {
		t.Errorf("status of never-created b = %+v", b)
	}
}

func TestGenerateIPs(t *testing.T) {
	hostIPs := []string{"192.168.1.10", "fd00::10"}
	tests := []struct {
		name        string
		hostNetwork bool
		runtimeIPs  []string
		oldIPs      []string
		want        []string
	}{
		{name: "runtime IPs", runtimeIPs: []string{"10.88.0.5", "fd88::5"}, oldIPs: []string{"10.88.0.1"}, want: []string{"10.88.0.5", "fd88::5"}},
		{name: "stopped pod keeps its old IPs", oldIPs: []string{"10.88.0.5"}, want: []string{"10.88.0.5"}},
		{name: "no IP ever", want: nil},
		{name: "host network uses the host IPs", hostNetwork: true, runtimeIPs: []string{"10.88.0.5"}, want: hostIPs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := genPod(v1.RestartPolicyAlways, nil, "a")
			pod.Spec.HostNetwork = tt.hostNetwork
			st := rt()
			st.IPs = tt.runtimeIPs
			var old v1.PodStatus
			for _, ip := range tt.oldIPs {
				old.PodIPs = append(old.PodIPs, v1.PodIP{IP: ip})
			}
			s := podstatus.Generate(podstatus.Input{Pod: pod, Runtime: st, Old: old, RuntimeName: "containerd", HostIPs: hostIPs, Now: tNow})
			var got []string
			for _, ip := range s.PodIPs {
				got = append(got, ip.IP)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("podIPs = %v, want %v", got, tt.want)
			}
			wantIP := ""
			if len(tt.want) > 0 {
				wantIP = tt.want[0]
			}
			if s.PodIP != wantIP {
				t.Errorf("podIP = %q, want %q", s.PodIP, wantIP)
			}
			if s.HostIP != hostIPs[0] || len(s.HostIPs) != 2 || s.HostIPs[0].IP != hostIPs[0] || s.HostIPs[1].IP != hostIPs[1] {
				t.Errorf("hostIP = %q, hostIPs = %v; want %v", s.HostIP, s.HostIPs, hostIPs)
			}
		})
	}
}

func TestGenerateReadyToStartContainers(t *testing.T) {
	tests := []struct {
		name        string
		hostNetwork bool
		sandbox     runtimeapi.PodSandboxState
		ips         []string
		want        v1.ConditionStatus
	}{
		{name: "ready sandbox with IP", sandbox: runtimeapi.PodSandboxState_SANDBOX_READY, ips: []string{"10.88.0.5"}, want: v1.ConditionTrue},
		{name: "ready sandbox without IP", sandbox: runtimeapi.PodSandboxState_SANDBOX_READY, want: v1.ConditionFalse},
		{name: "host network needs no IP", hostNetwork: true, sandbox: runtimeapi.PodSandboxState_SANDBOX_READY, want: v1.ConditionTrue},
		{name: "sandbox not ready", sandbox: runtimeapi.PodSandboxState_SANDBOX_NOTREADY, ips: []string{"10.88.0.5"}, want: v1.ConditionFalse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := genPod(v1.RestartPolicyAlways, nil, "a")
			pod.Spec.HostNetwork = tt.hostNetwork
			st := rt()
			st.IPs = tt.ips
			st.Sandboxes[0].State = tt.sandbox
			s := generate(pod, st, nil, v1.PodStatus{})
			if got := s.Conditions[0]; got.Type != v1.PodReadyToStartContainers || got.Status != tt.want {
				t.Errorf("first condition = %s, want PodReadyToStartContainers=%s", cond(got), tt.want)
			}
		})
	}
}

func TestGenerateLastTransitionTime(t *testing.T) {
	pod := genPod(v1.RestartPolicyAlways, nil, "a")
	old := v1.PodStatus{Conditions: []v1.PodCondition{
		{Type: v1.PodReady, Status: v1.ConditionFalse, LastTransitionTime: metav1.NewTime(tOld)},
		{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(tOld)},
		{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(tOld)},
	}}
	tests := []struct {
		name string
		rt   *container.PodStatus
		want map[v1.PodConditionType]time.Time
	}{
		{
			name: "a running: Ready changes, ContainersReady and PodScheduled do not",
			rt:   rt(inst("a", "a1", stRunning, 0, 0)),
			want: map[v1.PodConditionType]time.Time{
				v1.PodReady: tNow, v1.ContainersReady: tOld, v1.PodScheduled: tOld,
				v1.PodInitialized: tNow, v1.PodReadyToStartContainers: tNow, // not in Old
			},
		},
		{
			name: "a not running: Ready does not change, ContainersReady does",
			rt:   rt(),
			want: map[v1.PodConditionType]time.Time{
				v1.PodReady: tOld, v1.ContainersReady: tNow, v1.PodScheduled: tOld,
				v1.PodInitialized: tNow, v1.PodReadyToStartContainers: tNow,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := generate(pod, tt.rt, nil, old)
			if len(s.Conditions) != len(tt.want) {
				t.Fatalf("conditions = %q, want %d", conds(s.Conditions), len(tt.want))
			}
			for _, c := range s.Conditions {
				if want := tt.want[c.Type]; !c.LastTransitionTime.Time.Equal(want) {
					t.Errorf("%s lastTransitionTime = %v, want %v", cond(c), c.LastTransitionTime.Time, want)
				}
			}
		})
	}
}

func TestGenerateStartTime(t *testing.T) {
	pod := genPod(v1.RestartPolicyAlways, nil, "a")
	if s := generate(pod, rt(), nil, v1.PodStatus{}); s.StartTime == nil || !s.StartTime.Time.Equal(tNow) {
		t.Errorf("startTime of a new pod = %v, want now", s.StartTime)
	}
	old := metav1.NewTime(tOld)
	if s := generate(pod, rt(), nil, v1.PodStatus{StartTime: &old}); s.StartTime == nil || !s.StartTime.Time.Equal(tOld) {
		t.Errorf("startTime = %v, want the old one kept", s.StartTime)
	}
}

func TestGenerateQOSClass(t *testing.T) {
	res := func(req, lim string) v1.ResourceRequirements {
		r := v1.ResourceRequirements{}
		if req != "" {
			r.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse(req), v1.ResourceMemory: resource.MustParse("64Mi")}
		}
		if lim != "" {
			r.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse(lim), v1.ResourceMemory: resource.MustParse("64Mi")}
		}
		return r
	}
	tests := []struct {
		name string
		res  v1.ResourceRequirements
		want v1.PodQOSClass
	}{
		{"no resources", res("", ""), v1.PodQOSBestEffort},
		{"requests equal limits", res("100m", "100m"), v1.PodQOSGuaranteed},
		{"requests below limits", res("100m", "200m"), v1.PodQOSBurstable},
		{"requests only", res("100m", ""), v1.PodQOSBurstable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := genPod(v1.RestartPolicyAlways, nil, "a")
			pod.Spec.Containers[0].Resources = tt.res
			if got := generate(pod, rt(), nil, v1.PodStatus{}).QOSClass; got != tt.want {
				t.Errorf("qosClass = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestGenerateEphemeralContainers(t *testing.T) {
	pod := genPod(v1.RestartPolicyAlways, nil, "a")
	for _, n := range []string{"dbg1", "dbg2", "dbg3"} {
		pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, v1.EphemeralContainer{
			EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: n, Image: "img-" + n}, TargetContainerName: "a",
		})
	}
	noTarget := &podruntime.ContainerError{Reason: podruntime.ReasonCreateContainerConfig, Message: "unable to find target container a"}
	s := generate(pod, rt(inst("a", "c1", stRunning, 0, 0), inst("dbg1", "c2", stRunning, 0, 0), inst("dbg2", "c3", stExited, 1, 0)),
		map[string]*podruntime.ContainerError{"dbg3": noTarget}, v1.PodStatus{})
	want := []string{
		"dbg1 running",
		"dbg2 terminated(1 Error containerd://c3)",
		"dbg3 waiting(CreateContainerConfigError: unable to find target container a)",
	}
	if got := summaries(s.EphemeralContainerStatuses); !reflect.DeepEqual(got, want) {
		t.Errorf("ephemeral statuses\n got %q\nwant %q", got, want)
	}
	// They count for nothing else: the pod is Running and Ready on a alone.
	if got := summaries(s.ContainerStatuses); !reflect.DeepEqual(got, []string{"a running ready"}) {
		t.Errorf("container statuses %q", got)
	}
	if s.Phase != v1.PodRunning || !reflect.DeepEqual(conds(s.Conditions), []string{
		"PodReadyToStartContainers=True", "Initialized=True", "Ready=True", "ContainersReady=True", "PodScheduled=True",
	}) {
		t.Errorf("phase %s, conditions %q", s.Phase, conds(s.Conditions))
	}
}

// A pod that finished keeps the phase it ended with, whatever the runtime
// shows later: a restarted kubelet that finds a Succeeded pod's
// containers removed stops it again (terminating) without failing it.
func TestGenerateTerminalPhaseNeverChanges(t *testing.T) {
	for _, old := range []v1.PodPhase{v1.PodSucceeded, v1.PodFailed} {
		for _, terminating := range []bool{false, true} {
			s := podstatus.Generate(podstatus.Input{
				Pod: genPod(v1.RestartPolicyNever, nil, "a"), Runtime: noSandbox(), Old: v1.PodStatus{Phase: old},
				RuntimeName: "containerd", Now: tNow, Terminating: terminating,
			})
			if s.Phase != old {
				t.Errorf("old phase %s, terminating %v: phase %s", old, terminating, s.Phase)
			}
		}
	}
}
