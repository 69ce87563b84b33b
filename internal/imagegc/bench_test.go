package imagegc

import (
	"context"
	"fmt"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	testclock "k8s.io/utils/clock/testing"
)

// BenchmarkCollectIdle100Pods is one collection on an idle node with 100
// pods (200 containers with their sandboxes' images) and 30 images, below
// the high threshold: the image use is recorded and nothing removed. Use
// is recorded every 30 s and collected every 5 minutes: about two of
// these make the collector's CPU per minute, beside the CRI calls' cost
// in the runtime.
func BenchmarkCollectIdle100Pods(b *testing.B) {
	clock := testclock.NewFakeClock(time.Unix(1e9, 0))
	rt, is := critest.NewFakeRuntimeService(), critest.NewFakeImageService()
	is.Images = map[string]*runtimeapi.Image{}
	for i := 0; i < 30; i++ {
		id := fmt.Sprintf("sha256:%d", i)
		is.Images[id] = &runtimeapi.Image{Id: id, RepoTags: []string{fmt.Sprintf("img:%d", i)}, Size: 1 << 20}
	}
	var cs []*critest.FakeContainer
	for i := 0; i < 200; i++ {
		id := fmt.Sprintf("sha256:%d", i%30)
		cs = append(cs, &critest.FakeContainer{ContainerStatus: runtimeapi.ContainerStatus{
			Id: fmt.Sprintf("c%d", i), ImageRef: id, Image: &runtimeapi.ImageSpec{Image: id},
			State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	}
	rt.SetFakeContainers(cs)
	m := New(Config{Runtime: rt, Images: is, HighThresholdPercent: 85, LowThresholdPercent: 80, Clock: clock})
	m.fs = func(context.Context) (uint64, uint64, error) { return 100 << 30, 80 << 30, nil }
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		clock.Step(30 * time.Second)
		if err := m.GarbageCollect(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if len(is.Images) != 30 {
		b.Fatalf("%d images left", len(is.Images))
	}
}
