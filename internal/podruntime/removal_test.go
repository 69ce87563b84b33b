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
	removed := time.Now()
	if err := f.m.RemovePod(ctx, f.status()); err != nil {
		t.Fatal(err)
	}
	st := f.status()
	if len(st.Containers) != 0 || len(st.Sandboxes) != 1 {
		t.Fatalf("after RemovePod: want the containers gone and the sandbox kept, got %d containers, %d sandboxes", len(st.Containers), len(st.Sandboxes))
	}
	if !f.m.RemovingSandboxes(f.pod.UID) {
		t.Fatal("RemovingSandboxes false while the sandbox waits")
	}

	f.m.removeDue(ctx, removed.Add(30*time.Second))
	if n := len(f.status().Sandboxes); n != 1 {
		t.Fatalf("sandbox removed before its delay: %d left", n)
	}

	// A failed removal is retried a delay later.
	f.rt.InjectError("RemovePodSandbox", errors.New("runtime busy"))
	f.m.removeDue(ctx, removed.Add(61*time.Second))
	if n := len(f.status().Sandboxes); n != 1 || !f.m.RemovingSandboxes(f.pod.UID) {
		t.Fatalf("after a failed removal: %d sandboxes, still queued %v", n, f.m.RemovingSandboxes(f.pod.UID))
	}
	f.m.removeDue(ctx, removed.Add(122*time.Second))
	if st := f.status(); len(st.Sandboxes) != 0 {
		t.Fatalf("sandbox not removed once due: %+v", st.Sandboxes)
	}
	if f.m.RemovingSandboxes(f.pod.UID) {
		t.Fatal("RemovingSandboxes true after removal")
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
	if st := f.status(); len(st.Sandboxes) != 0 || f.m.RemovingSandboxes(f.pod.UID) {
		t.Fatalf("with no delay the sandbox goes at once: %+v", st.Sandboxes)
	}
}
