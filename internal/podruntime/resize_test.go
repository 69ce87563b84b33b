package podruntime

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"

	"github.com/skiff-sh/skiff/internal/podcgroups"
)

// resizeLog records, in order, the pod cgroup settings and container
// updates a resize makes.
type resizeLog struct {
	steps    []string
	actuated map[string]v1.ResourceRequirements
	usage    int64
}

// loggingRuntime logs UpdateContainerResources calls with their values.
type loggingRuntime struct {
	*critest.FakeRuntimeService
	log *resizeLog
}

func (r loggingRuntime) UpdateContainerResources(ctx context.Context, id string, res *runtimeapi.ContainerResources) error {
	l := res.GetLinux()
	r.log.steps = append(r.log.steps, fmt.Sprintf("ctr %s mem=%dMi quota=%d", id, l.MemoryLimitInBytes>>20, l.CpuQuota))
	return r.FakeRuntimeService.UpdateContainerResources(ctx, id, res)
}

// The pod cgroup as the sum of its containers, in round units.
func (l *resizeLog) PodLimits(pod *v1.Pod) podcgroups.Limits {
	var mem, quota int64
	var shares uint64
	for _, c := range pod.Spec.Containers {
		mem += c.Resources.Limits.Memory().Value()
		quota += c.Resources.Limits.Cpu().MilliValue() * 100
		shares += uint64(c.Resources.Requests.Cpu().MilliValue())
	}
	return podcgroups.Limits{Memory: &mem, CPUQuota: &quota, CPUShares: &shares}
}

func (l *resizeLog) SetPodSetting(_ *v1.Pod, s podcgroups.Setting) error {
	l.steps = append(l.steps, []string{"pod shares", "pod quota", "pod memory"}[s])
	return nil
}

func (l *resizeLog) PodMemoryUsage(*v1.Pod) (int64, error) { return l.usage, nil }

func (l *resizeLog) Actuated(_ types.UID, name string) (v1.ResourceRequirements, bool) {
	r, ok := l.actuated[name]
	return r, ok
}

func (l *resizeLog) SetActuated(_ types.UID, name string, r v1.ResourceRequirements) error {
	l.actuated[name] = r
	return nil
}

func (l *resizeLog) PodCgroupParent(*v1.Pod) string { return "" }

func (l *resizeLog) ContainerResources(_ *v1.Pod, c *v1.Container) *runtimeapi.LinuxContainerResources {
	return &runtimeapi.LinuxContainerResources{
		CpuShares: c.Resources.Requests.Cpu().MilliValue(), CpuQuota: c.Resources.Limits.Cpu().MilliValue() * 100,
		MemoryLimitInBytes: c.Resources.Limits.Memory().Value(), OomScoreAdj: -997,
	}
}

func cpuMem(cpu, mem string) v1.ResourceRequirements {
	l := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem)}
	return v1.ResourceRequirements{Requests: l, Limits: l.DeepCopy()}
}

// resizeFixture runs a pod of two containers, "up" and "down", with
// in-place resize wired to a log.
func resizeFixture(t *testing.T) (*fixture, *resizeLog) {
	f := newFixture(t, v1.RestartPolicyAlways)
	log := &resizeLog{actuated: map[string]v1.ResourceRequirements{}}
	f.m.cfg.CRI.Runtime = loggingRuntime{f.rt, log}
	f.m.cfg.Resources, f.m.cfg.Actuation, f.m.cfg.PodResizer = log, log, log
	app := f.pod.Spec.Containers[0]
	up, down := app, app
	up.Name, up.Resources = "up", cpuMem("200m", "64Mi")
	down.Name, down.Resources = "down", cpuMem("400m", "128Mi")
	f.pod.Spec.Containers = []v1.Container{up, down}
	if res := f.sync(); res.Err != nil || !res.Started {
		t.Fatalf("first sync: %+v", res)
	}
	if !reflect.DeepEqual(log.actuated["up"], up.Resources) || !reflect.DeepEqual(log.actuated["down"], down.Resources) {
		t.Fatalf("actuated at start: %v", log.actuated)
	}
	return f, log
}

func (f *fixture) ids() (up, down string) {
	st := f.status()
	return st.FindContainer("up").ID, st.FindContainer("down").ID
}

// Memory before CPU; for each, a growing pod limit before the
// containers, a shrinking one after (requests the other way round); and
// among containers, decreases first. No container restarts, the update
// leaves the OOM score alone, and what was done is recorded as actuated.
func TestResizeInPlaceSafeOrder(t *testing.T) {
	f, log := resizeFixture(t)
	upID, downID := f.ids()
	f.rt.SetFakeContainerStats([]*runtimeapi.ContainerStats{{
		Attributes: &runtimeapi.ContainerAttributes{Id: downID},
		Memory:     &runtimeapi.MemoryUsage{UsageBytes: &runtimeapi.UInt64Value{Value: 10 << 20}},
	}})
	f.pod.Spec.Containers[0].Resources = cpuMem("300m", "192Mi") // pod memory grows: 192Mi → 256Mi
	f.pod.Spec.Containers[1].Resources = cpuMem("100m", "64Mi")  // pod CPU shrinks: 600m → 400m
	res := f.sync()
	if res.Err != nil || res.ResizeErr != nil {
		t.Fatalf("resize sync: %v %v", res.Err, res.ResizeErr)
	}
	want := []string{
		"pod memory",
		"ctr " + downID + " mem=64Mi quota=40000",
		"ctr " + upID + " mem=192Mi quota=20000",
		"pod shares",
		"ctr " + downID + " mem=64Mi quota=10000",
		"ctr " + upID + " mem=192Mi quota=30000",
		"pod quota",
	}
	if !reflect.DeepEqual(log.steps, want) {
		t.Errorf("steps\n%q\nwant\n%q", log.steps, want)
	}
	if u, d := f.ids(); u != upID || d != downID {
		t.Error("a container was restarted")
	}
	for _, c := range f.pod.Spec.Containers {
		a := log.actuated[c.Name]
		if a.Limits.Cpu().Cmp(*c.Resources.Limits.Cpu()) != 0 || a.Limits.Memory().Cmp(*c.Resources.Limits.Memory()) != 0 {
			t.Errorf("%s actuated %v, want %v", c.Name, a, c.Resources)
		}
	}
	log.steps = nil
	f.sync()
	if len(log.steps) != 0 {
		t.Errorf("a sync after the resize did %q", log.steps)
	}
}

// A memory limit at or below what a container or the pod uses, page
// cache included (upstream reads usage, not the working set), is not set:
// the resize fails with upstream's message and nothing changes.
func TestResizeRefusesMemoryBelowUsage(t *testing.T) {
	f, log := resizeFixture(t)
	_, downID := f.ids()
	f.rt.SetFakeContainerStats([]*runtimeapi.ContainerStats{{
		Attributes: &runtimeapi.ContainerAttributes{Id: downID},
		Memory: &runtimeapi.MemoryUsage{
			WorkingSetBytes: &runtimeapi.UInt64Value{Value: 40 << 20}, // would fit
			UsageBytes:      &runtimeapi.UInt64Value{Value: 100 << 20},
		},
	}})
	log.usage = 128 << 20 // exactly the new pod limit
	f.pod.Spec.Containers[1].Resources = cpuMem("400m", "64Mi")
	res := f.sync()
	want := `cannot decrease memory limits: [attempting to set pod memory limit (134217728) below current usage (134217728), ` +
		`attempting to set container "down" memory limit (67108864) below current usage (104857600)]`
	if res.ResizeErr == nil || res.ResizeErr.Error() != want {
		t.Errorf("resize error %v\nwant %s", res.ResizeErr, want)
	}
	if len(log.steps) != 0 || actuatedMem(log, "down") != 128<<20 {
		t.Errorf("steps %q, actuated %v", log.steps, log.actuated["down"])
	}
}

// A container whose resize policy for the changed resource is
// RestartContainer is restarted with its new resources; the other one,
// resized too, is updated in place.
func TestResizeRestartsOnlyThatContainer(t *testing.T) {
	f, log := resizeFixture(t)
	upID, downID := f.ids()
	f.pod.Spec.Containers[0].ResizePolicy = []v1.ContainerResizePolicy{{ResourceName: v1.ResourceMemory, RestartPolicy: v1.RestartContainer}}
	f.pod.Spec.Containers[0].Resources = cpuMem("200m", "96Mi")
	f.pod.Spec.Containers[1].Resources = cpuMem("500m", "128Mi")
	if res := f.sync(); res.Err != nil || res.ResizeErr != nil {
		t.Fatalf("resize sync: %v %v", res.Err, res.ResizeErr)
	}
	st := f.status()
	up, down := st.FindContainer("up"), st.FindContainer("down")
	if up.ID == upID || up.RestartCount != 1 || down.ID != downID {
		t.Errorf("up %s (restarts %d), down %s: want only up restarted", up.ID, up.RestartCount, down.ID)
	}
	if got := actuatedMem(log, "up"); got != 96<<20 {
		t.Errorf("up actuated memory %d", got)
	}
	for _, s := range log.steps {
		if s == "ctr "+upID+" mem=96Mi quota=20000" {
			t.Errorf("the restarted container was also updated in place: %q", log.steps)
		}
	}
}

func actuatedMem(l *resizeLog, name string) int64 {
	r := l.actuated[name]
	return r.Limits.Memory().Value()
}
