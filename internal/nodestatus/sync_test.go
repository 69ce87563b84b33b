package nodestatus

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestStatusPostedOnlyOnChangeOrReportFrequency(t *testing.T) {
	client := fake.NewClientset()
	env := newTestController(t, client, nil)
	ctx := context.Background()
	env.c.runtime.update(ctx)
	if !env.c.tryRegister(ctx, env.c.initialNode(ctx)) {
		t.Fatal("registration failed")
	}
	sync := func(d time.Duration, wantPatches int, why string) *v1.Node {
		t.Helper()
		env.clock.Step(d)
		client.ClearActions()
		if err := env.c.syncNodeStatus(ctx); err != nil {
			t.Fatalf("%s: %v", why, err)
		}
		if got := patches(client.Actions()); got != wantPatches {
			t.Errorf("%s: %d status patches, want %d", why, got, wantPatches)
		}
		n, err := client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Never reported by the status loop yet: posted at once (as upstream,
	// whose last report time starts at zero).
	n := sync(time.Second, 1, "first update")
	if hb := condition(t, n, v1.NodeReady).LastHeartbeatTime; !hb.Time.Equal(env.clock.Now()) {
		t.Errorf("heartbeat %v, want now", hb)
	}
	sync(10*time.Second, 0, "nothing changed")
	sync(10*time.Second, 0, "nothing changed again")

	env.rt.set(func(f *fakeRuntime) { f.network = false })
	n = sync(10*time.Second, 1, "network went down")
	if c := condition(t, n, v1.NodeReady); c.Status != v1.ConditionFalse {
		t.Errorf("Ready = %s", c.Status)
	}
	sync(10*time.Second, 0, "still down, same message")

	lastPost := env.clock.Now().Add(-10 * time.Second)
	env.clock.SetTime(lastPost.Add(5*time.Minute - time.Second))
	sync(0, 0, "just before the report frequency")
	n = sync(time.Second, 1, "report frequency reached")
	if hb := condition(t, n, v1.NodeReady).LastHeartbeatTime; !hb.Time.Equal(env.clock.Now()) {
		t.Errorf("heartbeat %v, want now", hb)
	}

	// Someone removed the OS label: put back at once.
	n.Labels = map[string]string{"kubernetes.io/hostname": "node-a"}
	if _, err := client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	n = sync(time.Second, 1, "label removed")
	if n.Labels[v1.LabelOSStable] == "" {
		t.Errorf("labels = %v", n.Labels)
	}
}

func TestStatusUpdateRetries(t *testing.T) {
	client := fake.NewClientset()
	env := newTestController(t, client, nil)
	ctx := context.Background()
	env.c.runtime.update(ctx)
	if !env.c.tryRegister(ctx, env.c.initialNode(ctx)) {
		t.Fatal("registration failed")
	}
	fail := 3
	client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if fail > 0 {
			fail--
			return true, nil, errDown
		}
		return false, nil, nil
	})
	repeated := 0
	env.c.cfg.OnRepeatedHeartbeatFailure = func() { repeated++ }
	if err := env.c.syncNodeStatus(ctx); err != nil {
		t.Fatalf("4th try should succeed: %v", err)
	}
	if repeated != 2 {
		t.Errorf("OnRepeatedHeartbeatFailure called %d times, want 2 (after tries 2 and 3)", repeated)
	}
	fail = 5
	env.rt.set(func(f *fakeRuntime) { f.network = false })
	if err := env.c.syncNodeStatus(ctx); err == nil {
		t.Error("5 failures: want an error")
	}
}

func TestStatusChangedIgnoresHeartbeats(t *testing.T) {
	a := &v1.NodeStatus{Conditions: []v1.NodeCondition{
		{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.Unix(1, 0)},
		{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse},
	}}
	b := a.DeepCopy()
	b.Conditions[0].LastHeartbeatTime = metav1.Unix(2, 0)
	b.Conditions[0], b.Conditions[1] = b.Conditions[1], b.Conditions[0]
	if statusChanged(a, b) {
		t.Error("a heartbeat (and order) change counted as a change")
	}
	b.Conditions[1].Message = "x"
	if !statusChanged(a, b) {
		t.Error("a message change was missed")
	}
	c := a.DeepCopy()
	c.Capacity = v1.ResourceList{"cpu": q("1")}
	if !statusChanged(a, c) {
		t.Error("a capacity change was missed")
	}
}
