package podstatus_test

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/podstatus"
)

func reqLim(cpuReq, memReq, cpuLim, memLim string) v1.ResourceRequirements {
	return v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpuReq), v1.ResourceMemory: resource.MustParse(memReq)},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpuLim), v1.ResourceMemory: resource.MustParse(memLim)},
	}
}

func sameReq(a, b v1.ResourceRequirements) bool {
	for _, p := range [][2]v1.ResourceList{{a.Requests, b.Requests}, {a.Limits, b.Limits}} {
		if len(p[0]) != len(p[1]) {
			return false
		}
		for k, q := range p[0] {
			if r, ok := p[1][k]; !ok || q.Cmp(r) != 0 {
				return false
			}
		}
	}
	return true
}

// Container resources in the status are the runtime's settings of a
// running container where it reports them, the allocated ones where it
// does not (the values shown before for the same container stay); a
// regular init container shows none; allocatedResources only with its
// gate; the resize conditions carry the pod's generation.
func TestResizeStatus(t *testing.T) {
	pod := genPod(v1.RestartPolicyAlways, []string{"init"}, "reported", "silent")
	alloc := map[string]v1.ResourceRequirements{
		"reported": reqLim("250m", "64Mi", "500m", "128Mi"),
		"silent":   reqLim("100m", "32Mi", "200m", "64Mi"),
	}
	run := func(id, name string, r *runtimeapi.LinuxContainerResources) *container.ContainerStatus {
		return &container.ContainerStatus{ID: id, Name: name, State: container.StateRunning, StartedAt: tOld, CreatedAt: tOld, Resources: r}
	}
	st := rt(
		// The runtime runs "reported" with a resize not yet seen in allocated.
		run("r", "reported", &runtimeapi.LinuxContainerResources{CpuShares: 512, CpuQuota: 40000, CpuPeriod: 100000, MemoryLimitInBytes: 96 << 20}),
		run("s", "silent", nil),
		&container.ContainerStatus{ID: "i", Name: "init", State: container.StateExited, CreatedAt: tOld, FinishedAt: tOld},
	)
	old := v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{
		Name: "silent", ContainerID: "containerd://s", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}},
		Resources: ptrTo(reqLim("150m", "32Mi", "300m", "80Mi")),
	}}}
	pending := v1.PodCondition{Type: v1.PodResizePending, Status: v1.ConditionTrue, Reason: v1.PodReasonDeferred, Message: "m",
		LastTransitionTime: metav1.NewTime(tOld)}
	gen := func(report bool) v1.PodStatus {
		return podstatus.Generate(podstatus.Input{Pod: pod, Runtime: st, Old: old, RuntimeName: "containerd", Now: tNow,
			Resize: &podstatus.Resize{
				Allocated:       func(n string) (v1.ResourceRequirements, bool) { r, ok := alloc[n]; return r, ok },
				ReportAllocated: report,
				Conditions:      []v1.PodCondition{pending},
			}})
	}
	s := gen(false)
	want := map[string]v1.ResourceRequirements{
		"reported": reqLim("500m", "64Mi", "400m", "96Mi"),
		"silent":   reqLim("150m", "32Mi", "300m", "80Mi"),
	}
	for _, cs := range s.ContainerStatuses {
		if cs.Resources == nil || !sameReq(*cs.Resources, want[cs.Name]) {
			t.Errorf("%s: resources %+v, want %+v", cs.Name, cs.Resources, want[cs.Name])
		}
		if cs.AllocatedResources != nil {
			t.Errorf("%s: allocatedResources without the gate", cs.Name)
		}
	}
	if r := s.InitContainerStatuses[0].Resources; r != nil {
		t.Errorf("a regular init container shows resources %+v", r)
	}
	var got *v1.PodCondition
	for i := range s.Conditions {
		if s.Conditions[i].Type == v1.PodResizePending {
			got = &s.Conditions[i]
		}
	}
	if got == nil || got.ObservedGeneration != pod.Generation || got.Reason != v1.PodReasonDeferred || !got.LastTransitionTime.Equal(&pending.LastTransitionTime) {
		t.Errorf("PodResizePending %+v", got)
	}
	if a := gen(true).ContainerStatuses[1].AllocatedResources; a.Cpu().MilliValue() != 100 {
		t.Errorf("allocatedResources with the gate %v, want the allocated requests", a)
	}
}
