package podruntime

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/container"
)

func sidecar(name string) v1.Container {
	always := v1.ContainerRestartPolicyAlways
	return v1.Container{Name: name, Image: "busybox:1", RestartPolicy: &always}
}

func running(st *container.PodStatus, name string) bool {
	cs := st.FindContainer(name)
	return cs != nil && cs.State == container.StateRunning
}

func TestSidecarStartsBeforeNextInitContainer(t *testing.T) {
	f := newFixture(t, v1.RestartPolicyNever, sidecar("side"), v1.Container{Name: "init", Image: "busybox:1"})
	f.sync()
	st := f.status()
	// Without a startup probe a running sidecar has started: the next init
	// container follows in the same sync.
	if !running(st, "side") || !running(st, "init") || st.FindContainer("app") != nil {
		t.Fatalf("after first sync: %+v", st.Containers)
	}
	f.exit("init", 0)
	f.sync()
	if st := f.status(); !running(st, "app") || !running(st, "side") {
		t.Fatalf("app must start with the sidecar still running: %+v", st.Containers)
	}
}

func TestSidecarStartupProbeGatesNextInitContainer(t *testing.T) {
	side := sidecar("side")
	side.StartupProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
	f := newFixture(t, v1.RestartPolicyAlways, side, v1.Container{Name: "init", Image: "busybox:1"})
	started := false
	f.m.cfg.StartupDone = func(string) bool { return started }
	f.sync()
	f.sync()
	if st := f.status(); !running(st, "side") || st.FindContainer("init") != nil {
		t.Fatalf("init must wait for the sidecar's startup probe: %+v", st.Containers)
	}
	started = true
	f.sync()
	if !running(f.status(), "init") {
		t.Fatal("init must start once the sidecar has started")
	}
}

func TestSidecarRestartedWhateverThePolicy(t *testing.T) {
	f := newFixture(t, v1.RestartPolicyNever, sidecar("side"))
	f.pod.Spec.Containers[0].Command = []string{"sleep", "1000"}
	f.sync()
	f.exit("side", 0)
	f.sync()
	if cs := f.status().FindContainer("side"); cs.State != container.StateRunning || cs.RestartCount != 1 {
		t.Fatalf("a sidecar that exits is restarted even with restartPolicy Never: %+v", cs)
	}
	if app := f.status().FindContainer("app"); app.RestartCount != 0 {
		t.Fatalf("app must be left alone: %+v", app)
	}
}

func TestSidecarInBackOffHoldsUpNothingAfterInit(t *testing.T) {
	f := newFixture(t, v1.RestartPolicyAlways, sidecar("side"))
	f.sync()
	f.exit("side", 1)
	f.sync() // first restart is immediate
	f.exit("side", 1)
	f.exit("app", 1)
	res := f.sync()
	if w := res.Waiting["side"]; w == nil || w.Reason != ReasonCrashLoopBackOff {
		t.Fatalf("sidecar should be in back-off: %+v", res.Waiting)
	}
	if app := f.status().FindContainer("app"); app.State != container.StateRunning || app.RestartCount != 1 {
		t.Fatalf("the app container must restart while the sidecar backs off: %+v", app)
	}
}

func TestCompletedPodStopsItsSidecars(t *testing.T) {
	for _, policy := range []v1.RestartPolicy{v1.RestartPolicyNever, v1.RestartPolicyOnFailure} {
		f := newFixture(t, policy, sidecar("side1"), sidecar("side2"))
		f.sync()
		f.exit("app", 0)
		f.sync()
		st := f.status()
		if running(st, "side1") || running(st, "side2") || st.SandboxReady() {
			t.Fatalf("%s: once the app containers are done, sidecars and sandbox stop: %+v", policy, st.Containers)
		}
		// Nothing runs again: no new sandbox, no restarted sidecar.
		f.clock.Step(time.Hour)
		f.sync()
		st = f.status()
		if len(st.Sandboxes) != 1 || running(st, "side1") || running(st, "side2") || len(st.Instances("app")) != 1 {
			t.Fatalf("%s: a completed pod must stay stopped: %+v", policy, st.Containers)
		}
	}
}

func TestAlwaysPodKeepsSidecars(t *testing.T) {
	f := newFixture(t, v1.RestartPolicyAlways, sidecar("side"))
	f.sync()
	f.exit("app", 0)
	f.sync()
	st := f.status()
	if !running(st, "side") || !running(st, "app") || !st.SandboxReady() {
		t.Fatalf("restartPolicy Always: the app restarts and the sidecar stays: %+v", st.Containers)
	}
}

func TestFailedInitWithOnFailureRestarts(t *testing.T) {
	f := newFixture(t, v1.RestartPolicyOnFailure, v1.Container{Name: "init", Image: "busybox:1"})
	f.sync()
	f.exit("init", 1)
	f.sync()
	if cs := f.status().FindContainer("init"); cs.RestartCount != 1 || cs.State != container.StateRunning {
		t.Fatalf("failed init with OnFailure is restarted: %+v", cs)
	}
	if f.status().FindContainer("app") != nil {
		t.Fatal("app must wait for init")
	}
}

func TestKillPodStopsSidecarsLastInReverseOrder(t *testing.T) {
	f := newFixture(t, v1.RestartPolicyAlways, sidecar("one"), sidecar("two"), sidecar("three"))
	f.sync()
	if err := f.m.KillPod(context.Background(), f.pod, f.status(), nil); err != nil {
		t.Fatal(err)
	}
	st := f.status()
	finished := func(name string) time.Time { return st.FindContainer(name).FinishedAt }
	order := []string{"app", "three", "two", "one"}
	for i := 1; i < len(order); i++ {
		if !finished(order[i]).After(finished(order[i-1])) {
			t.Errorf("%s stopped at %v, not after %s at %v: want app, then sidecars last-declared first",
				order[i], finished(order[i]), order[i-1], finished(order[i-1]))
		}
	}
}

// A sidecar that fails its liveness probe is killed and restarted even in
// a pod that never restarts containers.
func TestUnhealthySidecarIsRestarted(t *testing.T) {
	f := newFixture(t, v1.RestartPolicyNever, sidecar("side"))
	ev, _ := withEvents(f)
	f.sync()
	first := f.status().FindContainer("side")
	f.m.cfg.Unhealthy = func(id string) (string, bool) { return "liveness", id == first.ID }
	f.sync()
	now := f.status().FindContainer("side")
	if now.ID == first.ID || now.State != container.StateRunning || now.RestartCount != 1 {
		t.Fatalf("sidecar after a failed liveness probe: %+v", now)
	}
	if !running(f.status(), "app") {
		t.Error("the app container must keep running")
	}
	if !ev.has("Killing: Container side failed liveness probe, will be restarted") {
		t.Errorf("events %q", ev.events)
	}
}
