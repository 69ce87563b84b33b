package statusmanager

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkStatusPatch measures what one status report computes before it
// sends anything: the merge with the apiserver's copy and the strategic
// merge patch, for a pod turning Running/Ready with n containers
// ("changed") and for a status that did not change ("unchanged", no patch).
func BenchmarkStatusPatch(b *testing.B) {
	for _, n := range []int{1, 5} {
		api := newPod("p", "uid-1")
		for i := 0; i < n; i++ {
			name := fmt.Sprintf("c%d", i)
			api.Status.ContainerStatuses = append(api.Status.ContainerStatuses, v1.ContainerStatus{
				Name: name, Image: "busybox", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}},
			})
		}
		kubelet := running()
		for i := 0; i < n; i++ {
			kubelet.ContainerStatuses = append(kubelet.ContainerStatuses, v1.ContainerStatus{
				Name: fmt.Sprintf("c%d", i), Image: "busybox", ImageID: "sha256:1234", ContainerID: fmt.Sprintf("containerd://%d", i),
				Ready: true, Started: ptr(true), State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.Now()}},
			})
		}
		b.Run(fmt.Sprintf("containers=%d/changed", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, err := statusPatch(api, mergeStatus(api.Status, kubelet))
				if err != nil || p == nil {
					b.Fatalf("patch %s, %v", p, err)
				}
			}
		})
		reported := api.DeepCopy()
		reported.Status = mergeStatus(api.Status, kubelet)
		b.Run(fmt.Sprintf("containers=%d/unchanged", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, err := statusPatch(reported, mergeStatus(reported.Status, kubelet))
				if err != nil || p != nil {
					b.Fatalf("patch %s, %v", p, err)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
