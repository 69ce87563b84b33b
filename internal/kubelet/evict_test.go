package kubelet

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/internal/container"
)

func TestApplyEviction(t *testing.T) {
	at := metav1.NewTime(time.Unix(1e9, 0))
	evicted := &podFailure{reason: "Evicted", message: "Usage of EmptyDir volume \"v\" exceeds the limit \"1Mi\". ", disruption: true, at: at}
	// Containers that exit 0 on SIGTERM still leave an evicted pod Failed.
	s := v1.PodStatus{Phase: v1.PodSucceeded}
	applyFailure(evicted, &s)
	if s.Phase != v1.PodFailed || s.Reason != "Evicted" || s.Message == "" {
		t.Errorf("status %+v", s)
	}
	if len(s.Conditions) != 1 || s.Conditions[0].Type != v1.DisruptionTarget || s.Conditions[0].Reason != v1.PodReasonTerminationByKubelet ||
		!s.Conditions[0].LastTransitionTime.Equal(&at) {
		t.Errorf("conditions %+v", s.Conditions)
	}
	applyFailure(evicted, &s)
	if len(s.Conditions) != 1 {
		t.Errorf("DisruptionTarget added twice: %+v", s.Conditions)
	}
	other := v1.PodStatus{Phase: v1.PodRunning}
	applyFailure(nil, &other)
	if other.Phase != v1.PodRunning || other.Reason != "" {
		t.Errorf("a pod not evicted changed: %+v", other)
	}
}

// An evicted pod turns Failed only once its containers stopped; its
// DisruptionTarget condition goes out at once. A pod already terminal
// stays so.
func TestTerminalPhaseWaitsForContainers(t *testing.T) {
	f := &podFailure{reason: "Evicted", message: "m", disruption: true}
	running := &container.PodStatus{Containers: []*container.ContainerStatus{{Name: "a", State: container.StateExited}, {Name: "b", State: container.StateRunning}}}
	stopped := &container.PodStatus{Containers: []*container.ContainerStatus{{Name: "a", State: container.StateExited}, {Name: "b", State: container.StateExited}}}
	old := v1.PodStatus{Phase: v1.PodRunning}

	s := v1.PodStatus{Phase: v1.PodRunning}
	applyFailure(f, &s)
	holdTerminalPhase(old, &s, running)
	if s.Phase != v1.PodRunning || s.Reason != "" || len(s.Conditions) != 1 {
		t.Errorf("with a container running: phase %s reason %q conditions %v; want Running with DisruptionTarget", s.Phase, s.Reason, s.Conditions)
	}
	s = v1.PodStatus{Phase: v1.PodRunning}
	applyFailure(f, &s)
	holdTerminalPhase(old, &s, stopped)
	if s.Phase != v1.PodFailed || s.Reason != "Evicted" {
		t.Errorf("with every container stopped: phase %s reason %q; want Failed, Evicted", s.Phase, s.Reason)
	}
	s = v1.PodStatus{Phase: v1.PodFailed, Reason: "Evicted"}
	holdTerminalPhase(v1.PodStatus{Phase: v1.PodFailed, Reason: "Evicted"}, &s, running)
	if s.Phase != v1.PodFailed {
		t.Errorf("a terminal pod went back to %s", s.Phase)
	}
}
