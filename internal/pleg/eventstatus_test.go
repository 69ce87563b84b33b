package pleg

import (
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fullEvent is an event for container id of pod uid as containerd sends
// it: made at `at`, with the statuses of the pod's sandbox sbID and of
// the containers given (id and state).
func fullEvent(uid, id, sbID string, typ runtimeapi.ContainerEventType, at time.Time, sbReady bool, ctrs map[string]runtimeapi.ContainerState) *runtimeapi.ContainerEventResponse {
	e := event(uid, id, typ)
	e.CreatedAt = at.UnixNano()
	e.PodSandboxStatus.Id = sbID
	e.PodSandboxStatus.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	if sbReady {
		e.PodSandboxStatus.State = runtimeapi.PodSandboxState_SANDBOX_READY
	}
	for cid, state := range ctrs {
		e.ContainersStatuses = append(e.ContainersStatuses, &runtimeapi.ContainerStatus{Id: cid, State: state,
			Metadata: &runtimeapi.ContainerMetadata{Name: "c-" + cid}})
	}
	return e
}

// An event that carries the whole pod, made after the PLEG's last look,
// stands for a read: the cache gets the event's statuses, the worker its
// event, and the runtime is not asked.
func TestEventCarryingTheWholePodIsNotRead(t *testing.T) {
	f := startEvented(t)
	f.rt.set(pod("p", sbs(sb("s1", running)), ctr("c1", exited)))
	f.sub.ch <- fullEvent("p", "c1", "s1", runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, f.clk.Now().Add(time.Second), true,
		map[string]runtimeapi.ContainerState{"c1": runtimeapi.ContainerState_CONTAINER_EXITED})
	if got, want := nextEvents(t, f.p, 1), sortedEvents(ev("p", ContainerDied, "c1")); !eventsEqual(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	if got := f.rt.takeCalls(); len(got) != 0 {
		t.Errorf("status reads = %v, want none", got)
	}
	st, _ := f.cache.Get("p")
	if st.Name != "p#event" {
		t.Fatalf("cached status %q, want the event's", st.Name)
	}
	if c := st.FindContainer("c-c1"); c == nil || c.State != exited {
		t.Errorf("cached status of p = %+v, want c1 exited", st)
	}
	// A later event older than that view is read instead.
	f.rt.set(pod("p", sbs(sb("s1", running)), ctr("c1", running)))
	f.sub.ch <- fullEvent("p", "c1", "s1", runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT, f.clk.Now().Add(500*time.Millisecond), true,
		map[string]runtimeapi.ContainerState{"c1": runtimeapi.ContainerState_CONTAINER_RUNNING})
	nextEvents(t, f.p, 1)
	if got := f.rt.takeCalls(); len(got) != 1 || got[0] != "p" {
		t.Errorf("status reads for an event older than the view = %v, want [p]", got)
	}
}

// Events that may not show the whole pod, or not its newest view, are
// read: one made before the last relist ended, one that lacks a
// container the PLEG knows, one of another sandbox, and a removal.
func TestEventsThatCannotStandForARead(t *testing.T) {
	runningC := runtimeapi.ContainerState_CONTAINER_RUNNING
	exitedC := runtimeapi.ContainerState_CONTAINER_EXITED
	stopped := runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT
	cases := []struct {
		name string
		ev   func(now time.Time) []*runtimeapi.ContainerEventResponse
	}{
		{"made before the relist ended", func(now time.Time) []*runtimeapi.ContainerEventResponse {
			return []*runtimeapi.ContainerEventResponse{fullEvent("p", "c1", "s1", stopped, now.Add(-time.Second), true,
				map[string]runtimeapi.ContainerState{"c1": exitedC})}
		}},
		{"a known container missing", func(now time.Time) []*runtimeapi.ContainerEventResponse {
			return []*runtimeapi.ContainerEventResponse{fullEvent("p", "c2", "s1", stopped, now.Add(time.Second), true,
				map[string]runtimeapi.ContainerState{"c2": exitedC})}
		}},
		{"another sandbox", func(now time.Time) []*runtimeapi.ContainerEventResponse {
			return []*runtimeapi.ContainerEventResponse{fullEvent("p", "c1", "s2", stopped, now.Add(time.Second), true,
				map[string]runtimeapi.ContainerState{"c1": exitedC})}
		}},
		{"a removal in the batch", func(now time.Time) []*runtimeapi.ContainerEventResponse {
			return []*runtimeapi.ContainerEventResponse{
				fullEvent("p", "c0", "s1", runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT, now.Add(time.Second), true,
					map[string]runtimeapi.ContainerState{"c1": runningC}),
				fullEvent("p", "c1", "s1", stopped, now.Add(2*time.Second), true,
					map[string]runtimeapi.ContainerState{"c1": exitedC}),
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := startEvented(t)
			f.rt.set(pod("p", sbs(sb("s1", running)), ctr("c1", exited)))
			for _, e := range c.ev(f.clk.Now()) {
				f.sub.ch <- e
			}
			nextEvents(t, f.p, 1)
			waitFor(t, "the read", func() bool { st, _ := f.cache.Get("p"); return st != nil && st.Name != "p#event" && st.Name != "p" })
			if got := f.rt.takeCalls(); len(got) == 0 || got[0] != "p" {
				t.Errorf("status reads = %v, want p read", got)
			}
		})
	}
}

// A new pod's first event, its sandbox's start, stands for a read once
// the PLEG has relisted: no other sandbox of the pod can exist unseen.
func TestNewPodsSandboxEventIsNotRead(t *testing.T) {
	f := startEvented(t)
	f.rt.set(pod("p", sbs(sb("s1", running)), ctr("c1", running)), pod("q", sbs(sb("t1", running))))
	f.sub.ch <- fullEvent("q", "t1", "t1", runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT, f.clk.Now().Add(time.Second), true, nil)
	if got, want := nextEvents(t, f.p, 1), sortedEvents(ev("q", ContainerStarted, "t1")); !eventsEqual(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	if got := f.rt.takeCalls(); len(got) != 0 {
		t.Errorf("status reads = %v, want none", got)
	}
	if st, _ := f.cache.Get("q"); st == nil || st.Name != "q#event" || !st.SandboxReady() {
		t.Errorf("cached status of q = %+v, want the event's, its sandbox ready", st)
	}
	// A container event of a pod the PLEG has not seen is read.
	f.rt.set(pod("p", sbs(sb("s1", running)), ctr("c1", running)), pod("q", sbs(sb("t1", running))),
		pod("r", sbs(sb("u1", running)), ctr("u2", running)))
	f.sub.ch <- fullEvent("r", "u2", "u1", runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT, f.clk.Now().Add(time.Second), true,
		map[string]runtimeapi.ContainerState{"u2": runtimeapi.ContainerState_CONTAINER_RUNNING})
	nextEvents(t, f.p, 2)
	if got := f.rt.takeCalls(); len(got) != 1 || got[0] != "r" {
		t.Errorf("status reads = %v, want [r]", got)
	}
}
