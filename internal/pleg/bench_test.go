package pleg_test

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/cri"
	"github.com/skiff-sh/skiff/internal/pleg"
	"github.com/skiff-sh/skiff/internal/podruntime"
)

// BenchmarkRelist measures one relist through the real podruntime.Manager
// over the CRI fake, with n pods of one running container each (n
// containers plus n sandboxes): "unchanged" is the steady state of a busy
// node, "one-changed" adds the status read of the one pod whose container
// changed state since the last relist.
func BenchmarkRelist(b *testing.B) {
	for _, n := range []int{100, 500} {
		rt, m := populate(b, n)
		cache := container.NewCache()
		p := pleg.New(pleg.Config{Runtime: m, Cache: cache})
		ctx, cancel := context.WithCancel(context.Background())
		go drain(ctx, p)
		p.Relist(ctx) // the first relist reads every pod
		b.Run(fmt.Sprintf("containers=%d/unchanged", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p.Relist(ctx)
			}
		})
		b.Run(fmt.Sprintf("containers=%d/one-changed", n), func(b *testing.B) {
			var id string
			rt.Lock()
			for cid := range rt.Containers {
				id = cid
				break
			}
			rt.Unlock()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				flip(rt, id, i%2 == 0)
				i++
				p.Relist(ctx)
			}
		})
		cancel()
	}
}

// populate starts n single-container pods in the fake through the Manager.
func populate(b *testing.B, n int) (*critest.FakeRuntimeService, *podruntime.Manager) {
	rt, img := critest.NewFakeRuntimeService(), critest.NewFakeImageService()
	img.SetFakeImages([]string{"pause:1", "busybox:1"})
	m := podruntime.New(podruntime.Config{
		CRI:        &cri.Client{Runtime: rt, Images: img, RuntimeName: "fake"},
		PodLogsDir: b.TempDir(),
	})
	ctx := context.Background()
	for i := 0; i < n; i++ {
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: "ns", UID: types.UID(fmt.Sprintf("uid-%d", i))},
			// Defaulted as the apiserver would: env needs it set.
			Spec: v1.PodSpec{EnableServiceLinks: ptr.To(true), Containers: []v1.Container{{
				Name: "main", Image: "busybox:1", ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"sleep", "3600"},
			}}},
		}
		st, err := m.GetPodStatus(ctx, cri.PodRef{UID: pod.UID, Name: pod.Name, Namespace: pod.Namespace})
		if err != nil {
			b.Fatal(err)
		}
		if res := m.SyncPod(ctx, pod, st, nil); res.Err != nil || len(res.Waiting) > 0 {
			b.Fatalf("starting pod %d: %v %v", i, res.Err, res.Waiting)
		}
	}
	return rt, m
}

// flip makes a container exited or running again, as a crash and restart
// would look to a relist.
func flip(rt *critest.FakeRuntimeService, id string, exited bool) {
	rt.Lock()
	defer rt.Unlock()
	if exited {
		rt.Containers[id].State = runtimeapi.ContainerState_CONTAINER_EXITED
	} else {
		rt.Containers[id].State = runtimeapi.ContainerState_CONTAINER_RUNNING
	}
}

func drain(ctx context.Context, p *pleg.PLEG) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.Events():
		}
	}
}
