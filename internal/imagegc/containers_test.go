package imagegc

import (
	"context"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
)

// Dead containers of pods that no longer run go with their not-ready
// sandboxes; a running pod keeps its running containers and its newest
// dead one per name.
func TestRemoveDeadContainers(t *testing.T) {
	rt := critest.NewFakeRuntimeService()
	ctr := func(id, sandbox, uid, name string, state runtimeapi.ContainerState, created int64) *critest.FakeContainer {
		return &critest.FakeContainer{SandboxID: sandbox, ContainerStatus: runtimeapi.ContainerStatus{
			Id: id, State: state, CreatedAt: created, Metadata: &runtimeapi.ContainerMetadata{Name: name},
			Labels: map[string]string{"io.kubernetes.pod.uid": uid, "io.kubernetes.container.name": name}}}
	}
	exited, running := runtimeapi.ContainerState_CONTAINER_EXITED, runtimeapi.ContainerState_CONTAINER_RUNNING
	rt.SetFakeContainers([]*critest.FakeContainer{
		ctr("gone-1", "sb-gone", "gone", "c", exited, 1),
		ctr("live-old", "sb-live", "live", "c", exited, 1),
		ctr("live-new", "sb-live", "live", "c", exited, 2),
		ctr("live-run", "sb-live", "live", "d", running, 3),
	})
	sb := func(id, uid string, state runtimeapi.PodSandboxState) *critest.FakePodSandbox {
		return &critest.FakePodSandbox{PodSandboxStatus: runtimeapi.PodSandboxStatus{Id: id, State: state,
			Metadata: &runtimeapi.PodSandboxMetadata{Uid: uid}, Labels: map[string]string{"io.kubernetes.pod.uid": uid}}}
	}
	rt.SetFakeSandboxes([]*critest.FakePodSandbox{
		sb("sb-gone", "gone", runtimeapi.PodSandboxState_SANDBOX_NOTREADY),
		sb("sb-live", "live", runtimeapi.PodSandboxState_SANDBOX_READY),
	})
	active := func(uid types.UID) bool { return uid == "live" }
	var heard []string
	if err := RemoveDeadContainers(context.Background(), rt, active, func(c *runtimeapi.Container) { heard = append(heard, c.Id) }); err != nil {
		t.Fatal(err)
	}
	sort.Strings(heard)
	if got := strings.Join(heard, ","); got != "gone-1,live-old" {
		t.Errorf("removals heard of: %s; want gone-1,live-old", got)
	}
	var left []string
	for id := range rt.Containers {
		left = append(left, id)
	}
	sort.Strings(left)
	if got := strings.Join(left, ","); got != "live-new,live-run" {
		t.Errorf("containers left %s; want live-new,live-run", got)
	}
	if _, ok := rt.Sandboxes["sb-gone"]; ok {
		t.Error("the finished pod's sandbox is still there")
	}
	if _, ok := rt.Sandboxes["sb-live"]; !ok {
		t.Error("the running pod's sandbox was removed")
	}
}
