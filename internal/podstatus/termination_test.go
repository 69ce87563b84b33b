package podstatus_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/podruntime"
)

// A container created but never started counts as exited, and could not
// run; with a start error waiting to be retried, that is its last state.
func TestGenerateContainerCannotRun(t *testing.T) {
	created := inst("a", "c1", container.StateCreated, 0, 0)
	s := generate(genPod(v1.RestartPolicyNever, nil, "a"), rt(created), nil, v1.PodStatus{})
	if got := stateString(s.ContainerStatuses[0].State); got != "terminated(128 ContainerCannotRun containerd://c1)" {
		t.Errorf("created, never started: %s", got)
	}
	if s.Phase != v1.PodFailed {
		t.Errorf("phase %s, want Failed: the only container of a Never pod could not run", s.Phase)
	}

	waiting := map[string]*podruntime.ContainerError{"a": {Reason: podruntime.ReasonRunContainer, Message: "exec: nope"}}
	s = generate(genPod(v1.RestartPolicyAlways, nil, "a"), rt(created), waiting, v1.PodStatus{})
	cs := s.ContainerStatuses[0]
	if got := stateString(cs.State) + " / " + stateString(cs.LastTerminationState); got != "waiting(RunContainerError: exec: nope) / terminated(128 ContainerCannotRun containerd://c1)" {
		t.Errorf("created, start failed, to be retried: %s", got)
	}

	// containerd marks a failed start exited with its own reason.
	failed := inst("a", "c2", container.StateExited, 128, 0)
	failed.Reason, failed.Message = podruntime.ReasonStartError, "failed to create containerd task"
	s = generate(genPod(v1.RestartPolicyAlways, nil, "a"), rt(failed), waiting, v1.PodStatus{})
	cs = s.ContainerStatuses[0]
	if got := stateString(cs.LastTerminationState); got != "terminated(128 StartError containerd://c2)" || cs.LastTerminationState.Terminated.Message != failed.Message {
		t.Errorf("failed start: %s %q", got, cs.LastTerminationState.Terminated.Message)
	}
}

// The termination messages of a pod's containers share 12 KiB, each
// keeping its beginning and whole characters.
func TestGenerateTruncatesMessages(t *testing.T) {
	pod := genPod(v1.RestartPolicyAlways, []string{"i"}, "a", "b")
	long := strings.Repeat("é", 3000) // 6000 bytes
	i := inst("i", "ci", container.StateExited, 0, 0)
	i.Message = "short"
	a := inst("a", "ca", container.StateExited, 1, 0)
	a.Message = long
	aPrev := inst("a", "ca0", container.StateExited, 1, 0)
	aPrev.Message = long
	b := inst("b", "cb", container.StateRunning, 0, 1)
	bPrev := inst("b", "cb0", container.StateExited, 1, 0)
	bPrev.Message = "x" + long
	waiting := map[string]*podruntime.ContainerError{"a": {Reason: podruntime.ReasonCrashLoopBackOff}}
	s := generate(pod, rt(b, a, i, aPrev, bPrev), waiting, v1.PodStatus{})
	per := 12 << 10 / 3
	for _, m := range []struct {
		what string
		got  *v1.ContainerStateTerminated
		want int
	}{
		{"init", s.InitContainerStatuses[0].State.Terminated, len("short")},
		{"a's last state", s.ContainerStatuses[0].LastTerminationState.Terminated, per},
		{"b's last state", s.ContainerStatuses[1].LastTerminationState.Terminated, per - 1},
	} {
		if m.got == nil {
			t.Fatalf("%s: no terminated state", m.what)
		}
		if len(m.got.Message) != m.want || !utf8.ValidString(m.got.Message) {
			t.Errorf("%s: message of %d bytes (valid UTF-8: %v), want %d", m.what, len(m.got.Message), utf8.ValidString(m.got.Message), m.want)
		}
	}
}
