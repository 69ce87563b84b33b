package container

import (
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestStateFromCRI(t *testing.T) {
	tests := []struct {
		in   runtimeapi.ContainerState
		want State
	}{
		{runtimeapi.ContainerState_CONTAINER_CREATED, StateCreated},
		{runtimeapi.ContainerState_CONTAINER_RUNNING, StateRunning},
		{runtimeapi.ContainerState_CONTAINER_EXITED, StateExited},
		{runtimeapi.ContainerState_CONTAINER_UNKNOWN, StateUnknown},
		{runtimeapi.ContainerState(42), StateUnknown},
	}
	for _, tt := range tests {
		if got := StateFromCRI(tt.in); got != tt.want {
			t.Errorf("StateFromCRI(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestPodStatusLookups(t *testing.T) {
	st := &PodStatus{Containers: []*ContainerStatus{
		{ID: "a2", Name: "a"}, {ID: "b1", Name: "b"}, {ID: "a1", Name: "a"},
	}}
	if c := st.FindContainer("a"); c == nil || c.ID != "a2" {
		t.Errorf("FindContainer(a) = %+v, want the newest, a2", c)
	}
	if c := st.FindContainer("zz"); c != nil {
		t.Errorf("FindContainer(zz) = %+v, want nil", c)
	}
	var ids []string
	for _, c := range st.Instances("a") {
		ids = append(ids, c.ID)
	}
	if len(ids) != 2 || ids[0] != "a2" || ids[1] != "a1" {
		t.Errorf("Instances(a) = %v, want [a2 a1]", ids)
	}
	var nilStatus *PodStatus
	if nilStatus.FindContainer("a") != nil || len(nilStatus.Instances("a")) != 0 || nilStatus.SandboxReady() {
		t.Error("a nil PodStatus must have no containers and no ready sandbox")
	}
}

func TestSandboxReady(t *testing.T) {
	sb := func(s runtimeapi.PodSandboxState) *runtimeapi.PodSandboxStatus {
		return &runtimeapi.PodSandboxStatus{State: s}
	}
	tests := []struct {
		name string
		sbs  []*runtimeapi.PodSandboxStatus
		want bool
	}{
		{"none", nil, false},
		{"newest ready", []*runtimeapi.PodSandboxStatus{sb(runtimeapi.PodSandboxState_SANDBOX_READY), sb(runtimeapi.PodSandboxState_SANDBOX_NOTREADY)}, true},
		{"newest not ready", []*runtimeapi.PodSandboxStatus{sb(runtimeapi.PodSandboxState_SANDBOX_NOTREADY), sb(runtimeapi.PodSandboxState_SANDBOX_READY)}, false},
	}
	for _, tt := range tests {
		if got := (&PodStatus{Sandboxes: tt.sbs}).SandboxReady(); got != tt.want {
			t.Errorf("%s: SandboxReady = %v, want %v", tt.name, got, tt.want)
		}
	}
}
