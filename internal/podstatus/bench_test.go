package podstatus_test

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/podstatus"
)

// BenchmarkGenerate measures one status computation of a running pod with
// n app containers and one init container that completed, against the
// status computed the time before (the kubelet's steady state).
func BenchmarkGenerate(b *testing.B) {
	for _, n := range []int{1, 5} {
		b.Run(fmt.Sprintf("containers=%d", n), func(b *testing.B) {
			var apps []string
			for i := 0; i < n; i++ {
				apps = append(apps, fmt.Sprintf("app%d", i))
			}
			pod := genPod(v1.RestartPolicyAlways, []string{"init"}, apps...)
			cs := []*container.ContainerStatus{{
				ID: "c-init", Name: "init", State: container.StateExited, Image: "img-init",
				CreatedAt: tOld, StartedAt: tOld, FinishedAt: tOld,
			}}
			for i, a := range apps {
				cs = append(cs, &container.ContainerStatus{
					ID: fmt.Sprintf("c%d", i), Name: a, State: container.StateRunning, Image: "img-" + a,
					CreatedAt: tOld, StartedAt: tOld,
				})
			}
			in := podstatus.Input{Pod: pod, Runtime: rt(cs...), RuntimeName: "containerd", HostIPs: []string{"192.0.2.1"}, Now: tNow}
			in.Old = podstatus.Generate(in)
			b.ReportAllocs()
			for b.Loop() {
				_ = podstatus.Generate(in)
			}
		})
	}
}
