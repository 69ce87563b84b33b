package podruntime

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

func TestRemovePodDefersSandboxes(t *testing.T) {
	f := newFixture(t, v1.RestartPolicyAlways)
	f.m.cfg.SandboxRemovalDelay = time.Minute
	f.sync()
	ctx := context.Background()
	if err := f.m.KillPod(ctx, f.pod, f.status(), nil); err != nil {
		t.Fatal(err)
	}
	removed := f.clock.Now()
	if err := f.m.RemovePod(ctx, f.status()); err != nil {
		t.Fatal(err)
	}
	st := f.status()
	if len(st.Containers) != 0 || len(st.Sandboxes) != 1 {
		t.Fatalf("after RemovePod: want the containers gone and the sandbox kept, got %d containers, %d sandboxes", len(st.Containers), len(st.Sandboxes))
	}
	if !f.m.RemovingSandboxes(f.pod.UID, removed) {
		t.Fatal("RemovingSandboxes false while the sandbox waits")
	}

	f.m.removeDue(ctx, removed.Add(30*time.Second))
	if n := len(f.status().Sandboxes); n != 1 {
		t.Fatalf("sandbox removed before its delay: %d left", n)
	}

	// A failed removal is retried a delay later.
	f.rt.InjectError("RemovePodSandbox", errors.New("runtime busy"))
	f.m.removeDue(ctx, removed.Add(61*time.Second))
	if n := len(f.status().Sandboxes); n != 1 || !f.m.RemovingSandboxes(f.pod.UID, removed) {
		t.Fatalf("after a failed removal: %d sandboxes, still queued %v", n, f.m.RemovingSandboxes(f.pod.UID, removed))
	}
	listedBefore := f.clock.Now()
	f.clock.Step(time.Millisecond)
	f.m.removeDue(ctx, removed.Add(122*time.Second))
	f.clock.Step(time.Millisecond)
	listedAfter := f.clock.Now()
	if st := f.status(); len(st.Sandboxes) != 0 {
		t.Fatalf("sandbox not removed once due: %+v", st.Sandboxes)
	}
	// A listing from before the removal still shows it: not an orphan.
	// One from after it does not show it.
	if !f.m.RemovingSandboxes(f.pod.UID, listedBefore) {
		t.Fatal("a pod whose sandbox was removed after the listing is not removing")
	}
	if f.m.RemovingSandboxes(f.pod.UID, listedAfter) {
		t.Fatal("still removing for a listing taken after the removal")
	}
}

// While a due sandbox is being removed (a batch takes a while), its pod
// stays removing: housekeeping must not stop it again as an orphan.
func TestRemovingWhileRemovalRuns(t *testing.T) {
	var q removalQueue
	now := time.Now()
	q.add("pod-1", "sb-1", now)
	q.add("pod-1", "sb-2", now.Add(time.Hour))
	if taken := q.take(now); len(taken) != 1 || taken["sb-1"].pod != "pod-1" {
		t.Fatalf("take: %v", taken)
	}
	q.add("pod-2", "sb-3", now)
	taken := q.take(now)
	if !q.hasPod("pod-2", now.Add(time.Hour)) {
		t.Fatal("pod-2 not removing while its sandbox is taken")
	}
	for id := range taken {
		q.finish(id, now)
	}
	if !q.hasPod("pod-2", now.Add(-time.Second)) || q.hasPod("pod-2", now.Add(time.Second)) {
		t.Error("pod-2 removing for other than listings older than its removal")
	}
	// A listing stamped with the removal's own time may have come first.
	if !q.hasPod("pod-2", now) {
		t.Error("pod-2 not removing for a listing at the instant of its removal")
	}
	if q.take(now.Add(doneKept + time.Second)); len(q.done) != 0 {
		t.Errorf("old removals not forgotten: %v", q.done)
	}
}

func TestRemovePodAtOnceWithoutDelay(t *testing.T) {
	f := newFixture(t, v1.RestartPolicyAlways)
	f.sync()
	ctx := context.Background()
	if err := f.m.KillPod(ctx, f.pod, f.status(), nil); err != nil {
		t.Fatal(err)
	}
	if err := f.m.RemovePod(ctx, f.status()); err != nil {
		t.Fatal(err)
	}
	if st := f.status(); len(st.Sandboxes) != 0 || f.m.RemovingSandboxes(f.pod.UID, time.Now()) {
		t.Fatalf("with no delay the sandbox goes at once: %+v", st.Sandboxes)
	}
}
