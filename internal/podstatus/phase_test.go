package podstatus_test

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/podstatus"
)

// The cases follow upstream's getPhase tests (pkg/kubelet/kubelet_pods_test.go,
// TestPodPhaseWith*), with every container given a status as Generate does.

func waitingAPI(reason string) v1.ContainerStatus {
	return v1.ContainerStatus{State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason}}}
}

func runningAPI() v1.ContainerStatus {
	return v1.ContainerStatus{State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}, Started: ptrTo(true)}
}

func terminatedAPI(exit int32) v1.ContainerStatus {
	return v1.ContainerStatus{State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: exit}}}
}

// crashLoopAPI is a container waiting to be restarted after exiting.
func crashLoopAPI(exit int32) v1.ContainerStatus {
	s := waitingAPI("CrashLoopBackOff")
	s.LastTerminationState.Terminated = &v1.ContainerStateTerminated{ExitCode: exit}
	return s
}

var (
	waiting     = waitingAPI("ContainerCreating")
	running     = runningAPI()
	succeeded   = terminatedAPI(0)
	failed      = terminatedAPI(1)
	crashLoop0  = crashLoopAPI(0)
	crashLoop1  = crashLoopAPI(1)
	initWaiting = waitingAPI("PodInitializing")
	// runningNotStarted: a startup probe has not succeeded yet.
	runningNotStarted = v1.ContainerStatus{State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}, Started: ptrTo(false)}
)

func phasePod(policy v1.RestartPolicy, sidecar bool) *v1.Pod {
	init := []v1.Container{{Name: "x"}}
	if sidecar {
		init[0].RestartPolicy = ptrTo(v1.ContainerRestartPolicyAlways)
	}
	return &v1.Pod{Spec: v1.PodSpec{
		RestartPolicy:  policy,
		InitContainers: init,
		Containers:     []v1.Container{{Name: "a"}, {Name: "b"}},
	}}
}

func TestPhase(t *testing.T) {
	type cs = v1.ContainerStatus
	tests := []struct {
		name    string
		policy  v1.RestartPolicy
		sidecar bool // x is a restartable init container
		noInit  bool // the pod has no init container at all
		initd   bool // an app container was created in the current sandbox
		init    cs   // status of x
		a, b    cs   // statuses of the app containers
		want    v1.PodPhase
	}{
		// restartPolicy Always
		{name: "always: waiting", policy: v1.RestartPolicyAlways, noInit: true, a: waiting, b: waiting, want: v1.PodPending},
		{name: "always: all running", policy: v1.RestartPolicyAlways, noInit: true, a: running, b: running, want: v1.PodRunning},
		{name: "always: all stopped", policy: v1.RestartPolicyAlways, noInit: true, a: succeeded, b: failed, want: v1.PodRunning},
		{name: "always: all succeeded", policy: v1.RestartPolicyAlways, noInit: true, a: succeeded, b: succeeded, want: v1.PodRunning},
		{name: "always: running and stopped", policy: v1.RestartPolicyAlways, noInit: true, a: running, b: failed, want: v1.PodRunning},
		{name: "always: running and waiting", policy: v1.RestartPolicyAlways, noInit: true, a: running, b: waiting, want: v1.PodPending},
		{name: "always: running and crash looping", policy: v1.RestartPolicyAlways, noInit: true, a: running, b: crashLoop1, want: v1.PodRunning},
		{name: "always: all crash looping", policy: v1.RestartPolicyAlways, noInit: true, a: crashLoop0, b: crashLoop1, want: v1.PodRunning},
		// restartPolicy Always, init container
		{name: "always: init running", policy: v1.RestartPolicyAlways, init: running, a: initWaiting, b: initWaiting, want: v1.PodPending},
		{name: "always: init terminated non-zero", policy: v1.RestartPolicyAlways, init: failed, a: initWaiting, b: initWaiting, want: v1.PodPending},
		{name: "always: init waiting, terminated zero", policy: v1.RestartPolicyAlways, init: crashLoop0, a: initWaiting, b: initWaiting, want: v1.PodPending},
		{name: "always: init waiting, terminated non-zero", policy: v1.RestartPolicyAlways, init: crashLoop1, a: initWaiting, b: initWaiting, want: v1.PodPending},
		{name: "always: init waiting, never ran", policy: v1.RestartPolicyAlways, init: initWaiting, a: initWaiting, b: initWaiting, want: v1.PodPending},
		{name: "always: init succeeded, apps running", policy: v1.RestartPolicyAlways, init: succeeded, a: running, b: running, want: v1.PodRunning},
		{name: "always: init succeeded, apps being created", policy: v1.RestartPolicyAlways, init: succeeded, a: initWaiting, b: initWaiting, want: v1.PodPending},
		// restartPolicy Never
		{name: "never: waiting", policy: v1.RestartPolicyNever, noInit: true, a: waiting, b: waiting, want: v1.PodPending},
		{name: "never: all running", policy: v1.RestartPolicyNever, noInit: true, a: running, b: running, want: v1.PodRunning},
		{name: "never: all succeeded", policy: v1.RestartPolicyNever, noInit: true, a: succeeded, b: succeeded, want: v1.PodSucceeded},
		{name: "never: all failed", policy: v1.RestartPolicyNever, noInit: true, a: failed, b: failed, want: v1.PodFailed},
		{name: "never: one failed", policy: v1.RestartPolicyNever, noInit: true, a: succeeded, b: failed, want: v1.PodFailed},
		{name: "never: running and succeeded", policy: v1.RestartPolicyNever, noInit: true, a: running, b: succeeded, want: v1.PodRunning},
		{name: "never: running and waiting", policy: v1.RestartPolicyNever, noInit: true, a: running, b: waiting, want: v1.PodPending},
		// restartPolicy Never, init container
		{name: "never: init running", policy: v1.RestartPolicyNever, init: running, a: initWaiting, b: initWaiting, want: v1.PodPending},
		{name: "never: init terminated non-zero", policy: v1.RestartPolicyNever, init: failed, a: initWaiting, b: initWaiting, want: v1.PodFailed},
		{name: "never: init waiting, terminated zero", policy: v1.RestartPolicyNever, init: crashLoop0, a: initWaiting, b: initWaiting, want: v1.PodPending},
		{name: "never: init waiting, terminated non-zero", policy: v1.RestartPolicyNever, init: crashLoop1, a: initWaiting, b: initWaiting, want: v1.PodFailed},
		{name: "never: init waiting, never ran", policy: v1.RestartPolicyNever, init: initWaiting, a: initWaiting, b: initWaiting, want: v1.PodPending},
		{name: "never: init succeeded, apps running", policy: v1.RestartPolicyNever, init: succeeded, a: running, b: running, want: v1.PodRunning},
		{name: "never: init succeeded, apps succeeded", policy: v1.RestartPolicyNever, init: succeeded, a: succeeded, b: succeeded, want: v1.PodSucceeded},
		// restartPolicy OnFailure
		{name: "onfailure: waiting", policy: v1.RestartPolicyOnFailure, noInit: true, a: waiting, b: waiting, want: v1.PodPending},
		{name: "onfailure: all running", policy: v1.RestartPolicyOnFailure, noInit: true, a: running, b: running, want: v1.PodRunning},
		{name: "onfailure: all succeeded", policy: v1.RestartPolicyOnFailure, noInit: true, a: succeeded, b: succeeded, want: v1.PodSucceeded},
		{name: "onfailure: all failed", policy: v1.RestartPolicyOnFailure, noInit: true, a: failed, b: failed, want: v1.PodRunning},
		{name: "onfailure: succeeded and failed", policy: v1.RestartPolicyOnFailure, noInit: true, a: succeeded, b: failed, want: v1.PodRunning},
		{name: "onfailure: running and succeeded", policy: v1.RestartPolicyOnFailure, noInit: true, a: running, b: succeeded, want: v1.PodRunning},
		{name: "onfailure: running and waiting", policy: v1.RestartPolicyOnFailure, noInit: true, a: running, b: waiting, want: v1.PodPending},
		{name: "onfailure: running and crash looping", policy: v1.RestartPolicyOnFailure, noInit: true, a: running, b: crashLoop1, want: v1.PodRunning},
		// A container waiting to be restarted has not succeeded, whatever
		// its last exit code (upstream counts it stopped, not succeeded).
		{name: "onfailure: waiting to restart after exit 0, other succeeded", policy: v1.RestartPolicyOnFailure, noInit: true, a: crashLoop0, b: succeeded, want: v1.PodRunning},
		{name: "never: waiting after exit 0, other succeeded", policy: v1.RestartPolicyNever, noInit: true, a: crashLoop0, b: succeeded, want: v1.PodFailed},
		{name: "onfailure: init terminated non-zero", policy: v1.RestartPolicyOnFailure, init: failed, a: initWaiting, b: initWaiting, want: v1.PodPending},
		// restartable init container (sidecar)
		{name: "sidecar: not started yet", policy: v1.RestartPolicyAlways, sidecar: true, init: initWaiting, a: initWaiting, b: initWaiting, want: v1.PodPending},
		{name: "sidecar: running, apps being created", policy: v1.RestartPolicyAlways, sidecar: true, init: running, a: waiting, b: waiting, want: v1.PodPending},
		{name: "sidecar: running, one app running", policy: v1.RestartPolicyAlways, sidecar: true, init: running, a: running, b: waiting, want: v1.PodPending},
		{name: "sidecar: running, apps running", policy: v1.RestartPolicyAlways, sidecar: true, init: running, a: running, b: running, want: v1.PodRunning},
		{name: "sidecar: stopped, apps running", policy: v1.RestartPolicyAlways, sidecar: true, init: failed, a: running, b: running, want: v1.PodRunning},
		{name: "sidecar: crash looping, apps running", policy: v1.RestartPolicyAlways, sidecar: true, init: crashLoop1, a: running, b: running, want: v1.PodRunning},
		{name: "sidecar never: all succeeded", policy: v1.RestartPolicyNever, sidecar: true, init: succeeded, a: succeeded, b: succeeded, want: v1.PodSucceeded},
		{name: "sidecar never: sidecar failed, apps succeeded", policy: v1.RestartPolicyNever, sidecar: true, init: failed, a: succeeded, b: succeeded, want: v1.PodSucceeded},
		{name: "sidecar never: sidecar crash looping, apps succeeded", policy: v1.RestartPolicyNever, sidecar: true, init: crashLoop1, a: succeeded, b: succeeded, want: v1.PodSucceeded},
		// A running sidecar keeps the pod Running after its app
		// containers are done, until the sidecar is stopped (upstream).
		{name: "sidecar never: sidecar running, apps succeeded", policy: v1.RestartPolicyNever, sidecar: true, initd: true, init: running, a: succeeded, b: succeeded, want: v1.PodRunning},
		{name: "sidecar onfailure: sidecar running, apps succeeded", policy: v1.RestartPolicyOnFailure, sidecar: true, initd: true, init: running, a: succeeded, b: succeeded, want: v1.PodRunning},
		{name: "sidecar: running, not started yet", policy: v1.RestartPolicyAlways, sidecar: true, init: runningNotStarted, a: initWaiting, b: initWaiting, want: v1.PodPending},
		{name: "sidecar: running, not started, after initialization", policy: v1.RestartPolicyAlways, sidecar: true, initd: true, init: runningNotStarted, a: running, b: running, want: v1.PodRunning},
		{name: "sidecar: being recreated, apps running", policy: v1.RestartPolicyAlways, sidecar: true, initd: true, init: initWaiting, a: running, b: running, want: v1.PodPending},
		{name: "onfailure: init failed, apps ran before", policy: v1.RestartPolicyOnFailure, init: crashLoop1, a: succeeded, b: succeeded, want: v1.PodSucceeded},
		{name: "sidecar never: sidecar stopped, an app failed", policy: v1.RestartPolicyNever, sidecar: true, init: succeeded, a: succeeded, b: failed, want: v1.PodFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := phasePod(tt.policy, tt.sidecar)
			var initStatuses []v1.ContainerStatus
			if tt.noInit {
				pod.Spec.InitContainers = nil
			} else {
				initStatuses = []v1.ContainerStatus{tt.init}
			}
			if got := podstatus.Phase(pod, initStatuses, []v1.ContainerStatus{tt.a, tt.b}, tt.initd); got != tt.want {
				t.Fatalf("Phase = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestIsTerminal(t *testing.T) {
	for p, want := range map[v1.PodPhase]bool{
		v1.PodPending: false, v1.PodRunning: false, v1.PodUnknown: false, "": false,
		v1.PodSucceeded: true, v1.PodFailed: true,
	} {
		if got := podstatus.IsTerminal(p); got != want {
			t.Errorf("IsTerminal(%q) = %v, want %v", p, got, want)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }
