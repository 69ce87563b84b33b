package podstatus_test

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/podstatus"
)

// fakeProbes answers by container ID.
type fakeProbes struct{ started, ready map[string]bool }

func (f fakeProbes) Started(_ types.UID, _, id string) bool { return f.started[id] }
func (f fakeProbes) Ready(_ types.UID, _, id string) bool   { return f.ready[id] }

func TestProbesDecideStartedAndReady(t *testing.T) {
	for _, tc := range []struct {
		name             string
		started, ready   bool
		wantStarted      bool
		wantReady        bool
		wantPodCondition v1.ConditionStatus
		wantMessage      string
	}{
		{"not started", false, true, false, false, v1.ConditionFalse, "containers with unready status: [app]"},
		{"started, not ready", true, false, true, false, v1.ConditionFalse, "containers with unready status: [app]"},
		{"started and ready", true, true, true, true, v1.ConditionTrue, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := podstatus.Generate(podstatus.Input{
				Pod:     genPod(v1.RestartPolicyAlways, nil, "app"),
				Runtime: rt(inst("app", "c1", container.StateRunning, 0, 0)),
				Now:     tNow,
				Probes:  fakeProbes{started: map[string]bool{"c1": tc.started}, ready: map[string]bool{"c1": tc.ready}},
			})
			cs := s.ContainerStatuses[0]
			if cs.Started == nil || *cs.Started != tc.wantStarted || cs.Ready != tc.wantReady {
				t.Errorf("started %v ready %v, want %v %v", cs.Started, cs.Ready, tc.wantStarted, tc.wantReady)
			}
			for _, typ := range []v1.PodConditionType{v1.ContainersReady, v1.PodReady} {
				c := condition(s, typ)
				if c == nil || c.Status != tc.wantPodCondition || c.Message != tc.wantMessage {
					t.Errorf("%s = %+v, want %s %q", typ, c, tc.wantPodCondition, tc.wantMessage)
				}
			}
		})
	}
}

func condition(s v1.PodStatus, t v1.PodConditionType) *v1.PodCondition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			return &s.Conditions[i]
		}
	}
	return nil
}
