package volumemanager

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/internal/volume"
)

// fakeExpander answers each expansion check with the next of its
// answers (nothing to do once they are used up) and counts the checks.
type fakeExpander struct {
	mu      sync.Mutex
	answers []func() (*volume.Expansion, error)
	checks  int
}

func (f *fakeExpander) ExpandVolume(context.Context, *v1.Pod, *v1.Volume) (*volume.Expansion, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checks++
	if len(f.answers) == 0 {
		return nil, nil
	}
	a := f.answers[0]
	f.answers = f.answers[1:]
	return a()
}

func (f *fakeExpander) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.checks
}

func claim(name string) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}}
}

// A claim volume is checked for growth once set up and on every sync of
// its pod, other volumes never; a failed expansion is a
// FileSystemResizeFailed event and is retried after a back-off; a done
// one is an event on the pod and on the claim. The volume stays usable
// all along.
func TestClaimVolumesCheckedForExpansion(t *testing.T) {
	exp := &fakeExpander{answers: []func() (*volume.Expansion, error){
		func() (*volume.Expansion, error) { return nil, errors.New("driver said no") },
		func() (*volume.Expansion, error) {
			return &volume.Expansion{PVC: &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c"}},
				EventType: v1.EventTypeNormal, Reason: volume.ReasonResizeSucceeded, Message: "grown"}, nil
		},
	}}
	h := start(t, func(c *Config) { c.Expander = exp })
	pod := podWith("u1", claim("data"), emptyDir("scratch"))
	if _, err := h.m.WaitForMount(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	h.eventually(t, "the failed check retried after its back-off", time.Second, func() bool { return exp.count() == 2 })
	want := []event{{volume.ReasonResizeFailed, "driver said no"}, {volume.ReasonResizeSucceeded, "grown"}, {volume.ReasonResizeSucceeded, "grown"}}
	h.eventually(t, "the events", 0, func() bool { return len(h.rec.list()) == len(want) })
	for i, e := range h.rec.list() {
		if e != want[i] {
			t.Errorf("event %d: %+v, want %+v", i, e, want[i])
		}
	}
	// Checked again on the next sync, and not before.
	time.Sleep(50 * time.Millisecond)
	if n := exp.count(); n != 2 {
		t.Fatalf("%d checks before the next sync, want 2", n)
	}
	vols, err := h.m.WaitForMount(context.Background(), pod)
	if err != nil || vols["data"].HostPath == "" {
		t.Fatalf("volumes on the next sync: %v, %v", vols, err)
	}
	h.eventually(t, "a check on the next sync", 0, func() bool { return exp.count() == 3 })
	if n := h.mnt.count("data"); n != 1 {
		t.Errorf("the claim was set up %d times, want once", n)
	}
}

// A volume whose expansion is to stop (read-only, or expanded by its
// driver only when unused) is not checked again while it is set up.
func TestStoppedExpansionNotCheckedAgain(t *testing.T) {
	exp := &fakeExpander{answers: []func() (*volume.Expansion, error){
		func() (*volume.Expansion, error) {
			return &volume.Expansion{EventType: v1.EventTypeWarning, Reason: volume.ReasonResizeFailed, Message: "in use", Stop: true}, nil
		},
	}}
	h := start(t, func(c *Config) { c.Expander = exp })
	pod := podWith("u2", claim("data"))
	for range 3 {
		if _, err := h.m.WaitForMount(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
		h.eventually(t, "the first check", 0, func() bool { return exp.count() >= 1 })
	}
	time.Sleep(50 * time.Millisecond)
	if n := exp.count(); n != 1 {
		t.Errorf("%d checks, want 1", n)
	}
	if got := h.rec.list(); len(got) != 1 || got[0] != (event{volume.ReasonResizeFailed, "in use"}) {
		t.Errorf("events %+v", got)
	}
}
