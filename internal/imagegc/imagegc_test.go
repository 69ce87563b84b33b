package imagegc

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	testclock "k8s.io/utils/clock/testing"

	v1 "k8s.io/api/core/v1"
)

type events []string

func (e *events) Eventf(_ runtime.Object, _, reason, format string, args ...interface{}) {
	*e = append(*e, reason)
}

func remaining(is *critest.FakeImageService) string {
	var ids []string
	for id := range is.Images {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return strings.Join(ids, ",")
}

// Images go least recently used first, down to the low threshold; an
// image a container uses, the sandbox image and images younger than the
// minimum age stay.
func TestGarbageCollectLeastRecentlyUsedFirst(t *testing.T) {
	clock := testclock.NewFakeClock(time.Unix(1e9, 0))
	rt, is := critest.NewFakeRuntimeService(), critest.NewFakeImageService()
	img := func(id string, size uint64) *runtimeapi.Image {
		return &runtimeapi.Image{Id: id, RepoTags: []string{id}, Size: size}
	}
	is.Images = map[string]*runtimeapi.Image{
		"old": img("old", 300), "recent": img("recent", 300), "inuse": img("inuse", 300),
		"pause": img("pause", 300), "spare": img("spare", 300),
	}
	using := func(ids ...string) {
		var cs []*critest.FakeContainer
		for _, id := range ids {
			cs = append(cs, &critest.FakeContainer{ContainerStatus: runtimeapi.ContainerStatus{
				Id: "c-" + id, ImageRef: id, Image: &runtimeapi.ImageSpec{Image: id}, State: runtimeapi.ContainerState_CONTAINER_EXITED}})
		}
		rt.SetFakeContainers(cs)
	}
	var ev events
	m := New(Config{Runtime: rt, Images: is, HighThresholdPercent: 85, LowThresholdPercent: 80,
		MinAge: time.Minute, SandboxImage: "pause", Clock: clock, Recorder: &ev, NodeRef: &v1.ObjectReference{Name: "n"}})
	capacity, available := uint64(10000), uint64(1000) // 90 % used
	m.fs = func(context.Context) (uint64, uint64, error) { return capacity, available, nil }
	ctx := context.Background()

	// spare is in use throughout; old, then recent were used and left.
	using("old", "recent", "spare", "inuse")
	if _, err := m.detect(ctx); err != nil {
		t.Fatal(err)
	}
	clock.Step(2 * time.Minute)
	using("recent", "spare", "inuse")
	_, _ = m.detect(ctx)
	clock.Step(time.Minute)
	using("spare", "inuse")
	_, _ = m.detect(ctx)
	clock.Step(time.Minute)
	using("inuse")
	_, _ = m.detect(ctx)

	// Down to 80 %: 600 bytes to free, old then recent (300 each).
	capacity, available = 10000, 1400
	if err := m.GarbageCollect(ctx); err != nil {
		t.Fatal(err)
	}
	if got := remaining(is); got != "inuse,pause,spare" {
		t.Errorf("images left %s; want inuse,pause,spare", got)
	}
	// 1500 to free: spare is all it may remove, so FreeDiskSpaceFailed.
	available = 500
	err := m.GarbageCollect(ctx)
	if got := remaining(is); got != "inuse,pause" {
		t.Errorf("images left %s; want inuse,pause", got)
	}
	if err == nil || len(ev) != 1 || ev[0] != "FreeDiskSpaceFailed" {
		t.Errorf("err %v, events %v; want FreeDiskSpaceFailed", err, ev)
	}
}

func TestGarbageCollectStopsAtLowThreshold(t *testing.T) {
	clock := testclock.NewFakeClock(time.Unix(1e9, 0))
	rt, is := critest.NewFakeRuntimeService(), critest.NewFakeImageService()
	is.Images = map[string]*runtimeapi.Image{
		"a": {Id: "a", Size: 600}, "b": {Id: "b", Size: 600},
	}
	m := New(Config{Runtime: rt, Images: is, HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: time.Minute, Clock: clock})
	m.fs = func(context.Context) (uint64, uint64, error) { return 10000, 1400, nil } // 86 %: free 600
	ctx := context.Background()
	rt.SetFakeContainers([]*critest.FakeContainer{{ContainerStatus: runtimeapi.ContainerStatus{Id: "x", ImageRef: "a"}}})
	_, _ = m.detect(ctx)
	clock.Step(30 * time.Second)
	rt.SetFakeContainers(nil)
	_, _ = m.detect(ctx)
	clock.Step(time.Minute)
	is.Images["young"] = &runtimeapi.Image{Id: "young", Size: 600}
	if err := m.GarbageCollect(ctx); err != nil {
		t.Fatal(err)
	}
	// b was never used, a was: b goes first and is enough.
	if got := remaining(is); got != "a,young" {
		t.Errorf("images left %s; want a,young", got)
	}
}
