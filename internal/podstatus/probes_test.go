package podstatus_test

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
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

// A readiness result set on a recorded status gives what a status
// generated with that result gives, with the conditions' transition
// time moved only where their status changed; a result for no running
// container, or one that changes nothing, leaves the status alone.
func TestSetContainerReadinessMatchesGenerate(t *testing.T) {
	pod := genPod(v1.RestartPolicyAlways, []string{"side+"}, "app", "web")
	runtime := rt(inst("side", "s1", container.StateRunning, 0, 0), inst("app", "c1", container.StateRunning, 0, 0),
		inst("web", "c2", container.StateRunning, 0, 0))
	gen := func(ready map[string]bool, now time.Time, old v1.PodStatus) v1.PodStatus {
		return podstatus.Generate(podstatus.Input{Pod: pod, Runtime: runtime, Now: now, Old: old,
			Probes: fakeProbes{started: map[string]bool{"s1": true, "c1": true, "c2": true}, ready: ready}})
	}
	before := gen(map[string]bool{"s1": true, "c2": true}, tNow, v1.PodStatus{})
	later := tNow.Add(time.Minute)
	for _, tc := range []struct {
		name, id  string
		ready     bool
		wantReady map[string]bool // nil: no change
		wantFound bool
	}{
		{"the last unready container turns ready", "c1", true, map[string]bool{"s1": true, "c1": true, "c2": true}, true},
		{"a sidecar turns unready", "s1", false, map[string]bool{"c2": true}, true},
		{"already so", "c2", true, nil, true},
		{"no such container", "gone", true, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := *before.DeepCopy()
			changed, found := podstatus.SetContainerReadiness(pod, &s, tc.id, tc.ready, later)
			if changed != (tc.wantReady != nil) || found != tc.wantFound {
				t.Fatalf("changed, found = %v, %v", changed, found)
			}
			want := before
			if tc.wantReady != nil {
				want = gen(tc.wantReady, later, before)
			}
			if !equality.Semantic.DeepEqual(s, want) {
				t.Errorf("status:\n%+v\nwant:\n%+v", s, want)
			}
		})
	}
	// An exited container's result is not a running one's.
	s := gen(nil, tNow, v1.PodStatus{})
	s.ContainerStatuses[0].State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}
	if changed, found := podstatus.SetContainerReadiness(pod, &s, "c1", true, later); changed || found || s.ContainerStatuses[0].Ready {
		t.Errorf("an exited container was marked ready")
	}
}
