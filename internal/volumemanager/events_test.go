package volumemanager

import (
	"context"
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/volume/volerr"
)

// A failure naming its step gets it in the FailedMount event; a quiet one
// (a precondition pending, as a volume not attached yet) is retried
// without any event, as upstream records none.
func TestFailureEventsNameTheStepAndQuietOnesHaveNone(t *testing.T) {
	h := start(t)
	h.mnt.set("pending", func(context.Context) error {
		return volerr.Quiet(errors.New("volume x is not attached according to node status"))
	})
	h.mnt.set("failed", func(context.Context) error {
		return volerr.Step("MountVolume.WaitForAttach", errors.New("attach failed: disk busy"))
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _, _ = h.m.WaitForMount(ctx, podWith("q", v1.Volume{Name: "pending"}, v1.Volume{Name: "failed"})) }()
	h.eventually(t, "both retried", initialBackOff, func() bool { return h.mnt.count("pending") >= 3 && h.mnt.count("failed") >= 3 })
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
