package volumemanager

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/volume"
)

// remountMounter is the fake mounter whose volumes named in remount say
// they are to be set up on every sync (a CSI driver's requiresRepublish).
type remountMounter struct {
	*fakeMounter
	remount map[string]bool
}

func (r remountMounter) SetUpVolume(ctx context.Context, pod *v1.Pod, vol *v1.Volume) (volume.Mounted, error) {
	m, err := r.fakeMounter.SetUpVolume(ctx, pod, vol)
	m.Remount = r.remount[vol.Name]
	return m, err
}

// A volume whose setup asks for it is set up again on every sync of its
// pod; a failed republish is reported and retried, and the volume stays
// usable meanwhile (the pod's sync does not wait for it); other volumes
// are not set up again.
func TestRemountVolumeIsSetUpAgainOnEverySync(t *testing.T) {
	mnt := remountMounter{fakeMounter: newFakeMounter(), remount: map[string]bool{"csi": true}}
	rec := &fakeRecorder{}
	clk := testingclock.NewFakeClock(time.Unix(1e9, 0))
	h := &harness{m: New(Config{Mounter: mnt, Recorder: rec, Clock: clk}), mnt: mnt.fakeMounter, rec: rec, clock: clk}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.m.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	pod := podWith("rp", v1.Volume{Name: "csi"}, emptyDir("scratch"))
	for sync := 1; sync <= 3; sync++ {
		if _, err := h.m.WaitForMount(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
		h.eventually(t, "the volume set up once per sync", 0, func() bool { return h.mnt.count("csi") == sync })
	}
	if n := h.mnt.count("scratch"); n != 1 {
		t.Errorf("emptyDir set up %d times, want 1", n)
	}

	h.mnt.set("csi", func(context.Context) error { return errors.New("driver says no") })
	vols, err := h.m.WaitForMount(context.Background(), pod)
	if err != nil || vols["csi"].HostPath == "" {
		t.Fatalf("a volume due for republishing is not usable: %v, %v", vols, err)
	}
	h.eventually(t, "the failed republish reported", 0, func() bool {
		for _, e := range h.rec.list() {
			if e.reason == "FailedMount" && e.message == `MountVolume.SetUp failed for volume "csi" : driver says no` {
				return true
			}
		}
		return false
	})
	h.eventually(t, "the failed republish retried", time.Second, func() bool { return h.mnt.count("csi") >= 6 })
}
