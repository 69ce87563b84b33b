package kubelet

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestApplyEviction(t *testing.T) {
	k := &Kubelet{failed: map[types.UID]podFailure{"gone": {reason: "Evicted", message: "Usage of EmptyDir volume \"v\" exceeds the limit \"1Mi\". ", disruption: true}}}
	// Containers that exit 0 on SIGTERM still leave an evicted pod Failed.
	s := v1.PodStatus{Phase: v1.PodSucceeded}
	k.applyFailure("gone", &s)
	if s.Phase != v1.PodFailed || s.Reason != "Evicted" || s.Message == "" {
		t.Errorf("status %+v", s)
	}
	if len(s.Conditions) != 1 || s.Conditions[0].Type != v1.DisruptionTarget || s.Conditions[0].Reason != v1.PodReasonTerminationByKubelet {
		t.Errorf("conditions %+v", s.Conditions)
	}
	k.applyFailure("gone", &s)
	if len(s.Conditions) != 1 {
		t.Errorf("DisruptionTarget added twice: %+v", s.Conditions)
	}
	other := v1.PodStatus{Phase: v1.PodRunning}
	k.applyFailure("other", &other)
	if other.Phase != v1.PodRunning || other.Reason != "" {
		t.Errorf("a pod not evicted changed: %+v", other)
	}
}
