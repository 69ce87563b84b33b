package volumemanager

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/volume/volerr"
)

// A failure naming its step gets it in the FailedMount event; a pending
// precondition (a volume not attached yet) is retried without an event,
// as upstream records none, and its retries back off no longer than
// pendingRetry.
func TestFailureEventsNameTheStepAndPendingOnesHaveNone(t *testing.T) {
	h := start(t)
	h.mnt.set("pending", func(context.Context) error {
		return volerr.Pending(errors.New("volume x is not attached according to node status"))
	})
	h.mnt.set("failed", func(context.Context) error {
		return volerr.Step("MountVolume.WaitForAttach", errors.New("attach failed: disk busy"))
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_, _ = h.m.WaitForMount(ctx, podWith("q", v1.Volume{Name: "pending"}, v1.Volume{Name: "failed"}))
	}()
	h.eventually(t, "both retried", initialBackOff, func() bool { return h.mnt.count("pending") >= 3 && h.mnt.count("failed") >= 3 })
	// Eight failures in a row: a back-off of a minute, were it not
	// pending. One step of pendingRetry brings the next attempt.
	h.eventually(t, "eight pending failures", pendingRetry, func() bool { return h.mnt.count("pending") >= 8 })
	n := h.mnt.count("pending")
	for time.Sleep(50 * time.Millisecond); h.mnt.count("pending") != n; time.Sleep(50 * time.Millisecond) {
		n = h.mnt.count("pending")
	}
	h.clock.Step(pendingRetry)
	h.m.poke()
	h.eventually(t, "a retry after pendingRetry", 0, func() bool { return h.mnt.count("pending") > n })
	evs := h.rec.list()
	if len(evs) == 0 {
		t.Fatal("no event for the failed step")
	}
	for _, e := range evs {
		if e.reason != "FailedMount" || !strings.HasPrefix(e.message, `MountVolume.WaitForAttach failed for volume "failed" : `) ||
			!strings.HasSuffix(e.message, "attach failed: disk busy") {
			t.Errorf("event %+v, want only the failed step's", e)
		}
	}
}
