package podruntime

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	critest "k8s.io/cri-api/pkg/apis/testing"
	utilexec "k8s.io/utils/exec"

	"github.com/skiff-sh/skiff/internal/container"
)

type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (e *eventLog) Eventf(_ runtime.Object, _, reason, format string, args ...interface{}) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = append(e.events, reason+": "+fmt.Sprintf(format, args...))
}

func (e *eventLog) has(want string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Contains(e.events, want)
}

// stopRecorder notes the timeout of every StopContainer.
type stopRecorder struct {
	*critest.FakeRuntimeService
	mu    sync.Mutex
	stops []int64
}

func (r *stopRecorder) StopContainer(ctx context.Context, id string, timeout int64) error {
	r.mu.Lock()
	r.stops = append(r.stops, timeout)
	r.mu.Unlock()
	return r.FakeRuntimeService.StopContainer(ctx, id, timeout)
}

func withEvents(f *fixture) (*eventLog, *stopRecorder) {
	ev := &eventLog{}
	stops := &stopRecorder{FakeRuntimeService: f.rt}
	f.m.cfg.Recorder = ev
	f.m.cfg.CRI.Runtime = stops
	return ev, stops
}

func TestUnhealthyContainerIsRestarted(t *testing.T) {
	probeGrace := int64(7)
	for _, tc := range []struct {
		policy    v1.RestartPolicy
		kind      string
		message   string
		restarted bool
		grace     int64
	}{
		{v1.RestartPolicyAlways, "liveness", "Container app failed liveness probe, will be restarted", true, probeGrace},
		{v1.RestartPolicyOnFailure, "startup", "Container app failed startup probe, will be restarted", true, 30},
		{v1.RestartPolicyNever, "liveness", "Container app failed liveness probe", false, probeGrace},
	} {
		t.Run(string(tc.policy)+"/"+tc.kind, func(t *testing.T) {
			f := newFixture(t, tc.policy)
			f.pod.Spec.Containers[0].LivenessProbe = &v1.Probe{TerminationGracePeriodSeconds: &probeGrace}
			f.pod.Spec.Containers[0].StartupProbe = &v1.Probe{}
			ev, stops := withEvents(f)
			f.sync()
			first := f.status().FindContainer("app")
			f.m.cfg.Unhealthy = func(id string) (string, bool) { return tc.kind, id == first.ID }
			if res := f.sync(); res.Err != nil || !res.Started {
				t.Fatalf("sync: err %v, started %v", res.Err, res.Started)
			}
			if !ev.has("Killing: " + tc.message) {
				t.Errorf("events %q lack Killing %q", ev.events, tc.message)
			}
			if len(stops.stops) != 1 || stops.stops[0] != tc.grace {
				t.Errorf("StopContainer timeouts %v, want [%d]", stops.stops, tc.grace)
			}
			now := f.status().FindContainer("app")
			if tc.restarted != (now.ID != first.ID) {
				t.Fatalf("restarted = %v, want %v", now.ID != first.ID, tc.restarted)
			}
			if tc.restarted && (now.State != container.StateRunning || now.RestartCount != 1) {
				t.Errorf("restarted container: %+v", now)
			}
			if !tc.restarted && now.State != container.StateExited {
				t.Errorf("killed container: %+v", now)
			}
		})
	}
}

func TestPostStartHook(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		failed bool
	}{
		{"succeeds", nil, false},
		{"fails", utilexec.CodeExitError{Err: errors.New("command 'false' exited with 1"), Code: 1}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, v1.RestartPolicyAlways)
			f.pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"false"}}}}
			ev, _ := withEvents(f)
			if tc.err != nil {
				f.rt.InjectError("ExecSync", tc.err)
			}
			res := f.sync()
			calls := f.rt.GetCalls()
			start, exec := slices.Index(calls, "StartContainer"), slices.Index(calls, "ExecSync")
			if exec < start || start < 0 {
				t.Fatalf("ExecSync (%d) must follow StartContainer (%d): %v", exec, start, calls)
			}
			app := f.status().FindContainer("app")
			w := res.Waiting["app"]
			if !tc.failed {
				if w != nil || app.State != container.StateRunning {
					t.Fatalf("waiting %+v, state %s", w, app.State)
				}
				return
			}
			if w == nil || w.Reason != ReasonPostStartHook || !strings.Contains(w.Message, `Exec lifecycle hook ([false]) for Container "app" in Pod "p_ns(uid-1)" failed`) {
				t.Errorf("waiting = %+v", w)
			}
			if app.State != container.StateExited {
				t.Errorf("state %s, want the container killed", app.State)
			}
			if !ev.has("FailedPostStartHook: PostStartHook failed") || !ev.has("Killing: FailedPostStartHook") {
				t.Errorf("events %q", ev.events)
			}
			// The next sync restarts it.
			f.sync()
			if now := f.status().FindContainer("app"); now.State != container.StateRunning || now.RestartCount != 1 {
				t.Errorf("after the next sync: %+v", now)
			}
		})
	}
}

func TestPreStopHook(t *testing.T) {
	grace := int64(4)
	f := newFixture(t, v1.RestartPolicyAlways)
	f.pod.Spec.TerminationGracePeriodSeconds = &grace
	f.pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 1}}}
	ev, stops := withEvents(f)
	f.sync()
	killed := make(chan error, 1)
	go func() { killed <- f.m.KillPod(context.Background(), f.pod, f.status(), nil) }()
	// The sleep hook waits on the clock: a second passes for it.
	for !f.clock.HasWaiters() {
		goruntime.Gosched()
	}
	f.clock.Step(time.Second)
	if err := <-killed; err != nil {
		t.Fatal(err)
	}
	// The hook took 1 s of the 4, and succeeded: no FailedPreStopHook.
	if len(stops.stops) != 1 || stops.stops[0] != 3 {
		t.Errorf("StopContainer timeouts %v, want [3]", stops.stops)
	}
	for _, e := range ev.events {
		if strings.HasPrefix(e, "FailedPreStopHook") {
			t.Errorf("a sleep hook that ran its course gave %q", e)
		}
	}

	// A failing exec hook: an event, and the container is stopped anyway.
	f = newFixture(t, v1.RestartPolicyAlways)
	f.pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"false"}}}}
	ev, stops = withEvents(f)
	f.sync()
	f.rt.InjectError("ExecSync", utilexec.CodeExitError{Err: errors.New("exit 1"), Code: 1})
	if err := f.m.KillPod(context.Background(), f.pod, f.status(), nil); err != nil {
		t.Fatal(err)
	}
	if !ev.has("FailedPreStopHook: PreStopHook failed") || len(stops.stops) != 1 || stops.stops[0] != 30 {
		t.Errorf("events %q, stops %v", ev.events, stops.stops)
	}
}

func TestHTTPHook(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.Path+" "+r.UserAgent())
		mu.Unlock()
		w.WriteHeader(http.StatusInternalServerError) // hooks do not judge the status
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	f := newFixture(t, v1.RestartPolicyAlways)
	c := &f.pod.Spec.Containers[0]
	c.Ports = []v1.ContainerPort{{Name: "hook", ContainerPort: int32(mustAtoi(t, port))}}
	c.Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Host: "127.0.0.1", Path: "/started", Port: intstr.FromString("hook")}}}
	if res := f.sync(); res.Waiting["app"] != nil {
		t.Fatalf("waiting %+v", res.Waiting["app"])
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != "/started kube-lifecycle/1.34" {
		t.Errorf("server got %q", got)
	}

	// No server: the hook fails.
	srv.Close()
	f = newFixture(t, v1.RestartPolicyAlways)
	f.pod.Spec.Containers[0] = *c
	res := f.sync()
	if w := res.Waiting["app"]; w == nil || w.Reason != ReasonPostStartHook || !strings.Contains(w.Message, "HTTP lifecycle hook (/started)") {
		t.Errorf("waiting = %+v", w)
	}
}

func mustAtoi(t *testing.T, s string) int {
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A container failing its liveness probe again and again ends in
// CrashLoopBackOff, as a crashing one does.
func TestRepeatedLivenessFailuresBackOff(t *testing.T) {
	f := newFixture(t, v1.RestartPolicyAlways)
	f.sync()
	unhealthy := ""
	f.m.cfg.Unhealthy = func(id string) (string, bool) { return "liveness", id == unhealthy }
	fail := func() SyncResult {
		unhealthy = f.status().FindContainer("app").ID
		return f.sync()
	}
	for i := 1; i <= 2; i++ { // the first kills restart at once
		if res := fail(); res.Waiting["app"] != nil {
			t.Fatalf("kill %d: waiting %+v", i, res.Waiting["app"])
		}
		if now := f.status().FindContainer("app"); now.State != container.StateRunning || now.RestartCount != i {
			t.Fatalf("after kill %d: %+v", i, now)
		}
	}
	res := fail() // the attempt before ended moments ago
	if w := res.Waiting["app"]; w == nil || w.Reason != ReasonCrashLoopBackOff {
		t.Fatalf("third kill: waiting %+v, want CrashLoopBackOff", w)
	}
	if now := f.status().FindContainer("app"); now.State != container.StateExited {
		t.Fatalf("third kill restarted at once: %+v", now)
	}
	f.clock.Step(backOffInitial + time.Second)
	f.sync()
	if now := f.status().FindContainer("app"); now.State != container.StateRunning || now.RestartCount != 3 {
		t.Fatalf("after the back-off: %+v", now)
	}
}
