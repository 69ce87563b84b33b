package nodestatus

import (
	"context"
	"reflect"
	goruntime "runtime"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestStatusContents(t *testing.T) {
	env := newTestController(t, nil, nil)
	ctx := context.Background()
	env.c.runtime.update(ctx)
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
	env.c.setNodeStatus(ctx, node)

	info := node.Status.NodeInfo
	wantInfo := v1.NodeSystemInfo{
		MachineID: "machine-id", SystemUUID: "system-uuid", BootID: "boot-1",
		KernelVersion: "6.1.0-test", OSImage: "Debian GNU/Linux 12 (bookworm)",
		ContainerRuntimeVersion: "containerd://1.6.20", KubeletVersion: DefaultKubeletVersion,
		OperatingSystem: goruntime.GOOS, Architecture: goruntime.GOARCH,
	}
	if !reflect.DeepEqual(info, wantInfo) {
		t.Errorf("nodeInfo = %+v\nwant %+v", info, wantInfo)
	}
	if p := node.Status.DaemonEndpoints.KubeletEndpoint.Port; p != 10250 {
		t.Errorf("kubelet endpoint port = %d", p)
	}
	if len(node.Status.Addresses) != 2 || node.Status.Addresses[0].Type != v1.NodeInternalIP {
		t.Errorf("addresses = %v", node.Status.Addresses)
	}
	now := metav1.NewTime(env.clock.Now())
	want := []v1.NodeCondition{
		{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
		{Type: v1.NodeDiskPressure, Status: v1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure"},
		{Type: v1.NodePIDPressure, Status: v1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available"},
		{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"},
	}
	for i := range want {
		want[i].LastHeartbeatTime, want[i].LastTransitionTime = now, now
	}
	if !reflect.DeepEqual(node.Status.Conditions, want) {
		t.Errorf("conditions = %+v\nwant %+v", node.Status.Conditions, want)
	}
	if a := node.Status.Allocatable[v1.ResourceMemory]; a.Value() != 8*gi-100*mi-gi {
		t.Errorf("allocatable memory = %s", a.String())
	}
}

func TestReadyConditionFollowsRuntime(t *testing.T) {
	env := newTestController(t, nil, nil)
	ctx := context.Background()
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
	step := func(d time.Duration) v1.NodeCondition {
		t.Helper()
		env.clock.Step(d)
		env.c.runtime.update(ctx)
		env.c.setNodeStatus(ctx, node)
		return condition(t, node, v1.NodeReady)
	}
	expect := func(c v1.NodeCondition, status v1.ConditionStatus, msg string, transition time.Time) {
		t.Helper()
		if c.Status != status || c.Message != msg || !c.LastTransitionTime.Time.Equal(transition) || !c.LastHeartbeatTime.Time.Equal(env.clock.Now()) {
			t.Errorf("Ready = %s %q (transition %v, heartbeat %v), want %s %q (transition %v, heartbeat now %v)",
				c.Status, c.Message, c.LastTransitionTime, c.LastHeartbeatTime, status, msg, transition, env.clock.Now())
		}
	}

	// Before any runtime check.
	env.c.setNodeStatus(ctx, node)
	t0 := env.clock.Now()
	expect(condition(t, node, v1.NodeReady), v1.ConditionFalse, "container runtime status check may not have completed yet", t0)
	if c := condition(t, node, v1.NodeReady); c.Reason != "KubeletNotReady" {
		t.Errorf("reason = %s", c.Reason)
	}

	t1 := env.clock.Now().Add(time.Second)
	expect(step(time.Second), v1.ConditionTrue, "kubelet is posting ready status", t1)
	expect(step(10*time.Second), v1.ConditionTrue, "kubelet is posting ready status", t1)
	lastGood := env.clock.Now()

	// Status calls fail: still Ready until 30 s after the last good one.
	env.rt.set(func(f *fakeRuntime) { f.statusErr = errDown })
	expect(step(20*time.Second), v1.ConditionTrue, "kubelet is posting ready status", t1)
	c := step(10 * time.Second)
	if d := env.clock.Now().Sub(lastGood); d != runtimeDownThreshold {
		t.Fatalf("%v since the last good status, want exactly the threshold", d)
	}
	tDown := env.clock.Now()
	expect(c, v1.ConditionFalse, "container runtime is down", tDown)
	// The message may change, the transition time stays.
	env.rt.set(func(f *fakeRuntime) { f.statusErr, f.network = nil, false })
	expect(step(10*time.Second), v1.ConditionFalse,
		"container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized", tDown)

	env.rt.set(func(f *fakeRuntime) { f.runtimeOK = false })
	expect(step(31*time.Second), v1.ConditionFalse,
		"[container runtime is down, container runtime not ready: RuntimeReady=false reason:RuntimeBroken message:runtime is broken, "+
			"container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized]", tDown)

	env.rt.set(func(f *fakeRuntime) { f.runtimeOK, f.network = true, true })
	tUp := env.clock.Now().Add(time.Second)
	expect(step(time.Second), v1.ConditionTrue, "kubelet is posting ready status", tUp)

	events := env.events.take()
	want := []string{
		"Normal NodeHasSufficientMemory: Node node-a status is now: NodeHasSufficientMemory",
		"Normal NodeHasNoDiskPressure: Node node-a status is now: NodeHasNoDiskPressure",
		"Normal NodeHasSufficientPID: Node node-a status is now: NodeHasSufficientPID",
		"Normal NodeReady: Node node-a status is now: NodeReady",
		"Normal NodeNotReady: Node node-a status is now: NodeNotReady",
		"Normal NodeReady: Node node-a status is now: NodeReady",
	}
	if !reflect.DeepEqual(events, want) {
		t.Errorf("events = %q\nwant %q", events, want)
	}
}

func TestHealthCheckAndMissingCapacity(t *testing.T) {
	env := newTestController(t, nil, func(c *Config) {
		c.HealthChecks = []HealthCheck{{Name: "PLEG", Check: func() error { return errDown }}}
	})
	ctx := context.Background()
	env.c.runtime.update(ctx)
	node := &v1.Node{}
	env.c.setNodeStatus(ctx, node)
	if c := condition(t, node, v1.NodeReady); c.Message != "PLEG is not healthy: "+errDown.Error() {
		t.Errorf("message = %q", c.Message)
	}
	node = &v1.Node{}
	setReady(node, nil, requiredCapacity(true), metav1.Now(), func(string) {})
	if c := condition(t, node, v1.NodeReady); c.Message != "missing node capacity for resources: cpu, memory, pods, ephemeral-storage" {
		t.Errorf("message = %q", c.Message)
	}
}

func TestRebootEventAndExtendedResources(t *testing.T) {
	env := newTestController(t, nil, nil)
	ctx := context.Background()
	node := &v1.Node{Status: v1.NodeStatus{
		NodeInfo:    v1.NodeSystemInfo{BootID: "boot-0"},
		Capacity:    v1.ResourceList{"example.com/gpu": q("2")},
		Allocatable: v1.ResourceList{"example.com/gpu": q("2"), "example.com/gone": q("1")},
	}}
	env.c.setNodeStatus(ctx, node)
	if got := env.events.take(); len(got) == 0 || got[0] != "Warning Rebooted: Node node-a has been rebooted, boot id: boot-1" {
		t.Errorf("events = %q", got)
	}
	if _, ok := node.Status.Allocatable["example.com/gone"]; ok {
		t.Error("allocatable kept an extended resource that has no capacity")
	}
	if a := node.Status.Allocatable["example.com/gpu"]; a.Value() != 2 {
		t.Errorf("extended resource allocatable = %s, want kept", a.String())
	}
}

// The device plugins' resources: every device in capacity, the healthy
// ones in allocatable, a resource gone set to zero rather than dropped.
func TestDevicePluginResources(t *testing.T) {
	env := newTestController(t, nil, nil)
	env.c.cfg.Extended = func() (v1.ResourceList, v1.ResourceList, []string) {
		return v1.ResourceList{"example.com/gpu": q("3")}, v1.ResourceList{"example.com/gpu": q("2")}, []string{"example.com/old"}
	}
	node := &v1.Node{Status: v1.NodeStatus{
		Capacity:    v1.ResourceList{"example.com/old": q("4")},
		Allocatable: v1.ResourceList{"example.com/old": q("4")},
	}}
	env.c.setNodeStatus(context.Background(), node)
	for name, want := range map[v1.ResourceName][2]int64{"example.com/gpu": {3, 2}, "example.com/old": {0, 0}} {
		c, a := node.Status.Capacity[name], node.Status.Allocatable[name]
		if c.Value() != want[0] || a.Value() != want[1] {
			t.Errorf("%s: capacity %s allocatable %s, want %d and %d", name, c.String(), a.String(), want[0], want[1])
		}
		if _, ok := node.Status.Capacity[name]; !ok {
			t.Errorf("%s missing from capacity", name)
		}
	}
}
