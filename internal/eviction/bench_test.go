package eviction

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// BenchmarkSynchronizeIdle100Pods is one look of the eviction manager at
// an idle node with 100 pods and upstream's default thresholds: what it
// costs on top of the stats sampling, which runs anyway. It looks every
// 10 s: six of these make its CPU per minute.
func BenchmarkSynchronizeIdle100Pods(b *testing.B) {
	f := newFake()
	var pods []*v1.Pod
	for i := 0; i < 100; i++ {
		name := fmt.Sprintf("pod-%d", i)
		pods = append(pods, rankedPod(name, "64Mi", 0))
		f.pods[name] = podStats(name, 32*mi, 1*mi)
	}
	m := f.manager([]Threshold{hard(SignalMemoryAvailable, "100Mi"), hard(SignalNodeFsAvailable, "1Gi"),
		hard(SignalImageFsAvailable, "1Gi"), hard(SignalNodeFsInodesFree, "5")}, pods)
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		f.clock.Step(10 * time.Second)
		m.Synchronize(ctx)
	}
	if len(f.evicted) != 0 {
		b.Fatalf("evicted %v on an idle node", f.evicted)
	}
}
