package nodestatus

import (
	"context"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// giveUIDs makes the fake apiserver assign a UID to created nodes, as the
// real one does.
func giveUIDs(client *fake.Clientset) {
	client.PrependReactor("create", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		a.(k8stesting.CreateAction).GetObject().(*v1.Node).UID = "node-uid"
		return false, nil, nil
	})
}

func TestRunRegistersPostsStatusAndRenewsLease(t *testing.T) {
	client := fake.NewClientset()
	giveUIDs(client)
	env := newTestController(t, client, nil)
	env.realClock()
	env.c.leaseRenew = 50 * time.Millisecond
	// Not ready at start: the node turns Ready quickly once the network is.
	env.rt.set(func(f *fakeRuntime) { f.network = false })

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); env.c.Run(ctx) }()
	defer func() { cancel(); wg.Wait() }()

	waitFor(t, "the node to register", func() bool { return env.c.Node() != nil })
	if c := condition(t, env.c.Node(), v1.NodeReady); c.Status != v1.ConditionFalse {
		t.Errorf("Ready = %s with the network down", c.Status)
	}
	// Waiting for Ready costs the apiserver nothing between full updates.
	time.Sleep(50 * time.Millisecond)
	client.ClearActions()
	time.Sleep(500 * time.Millisecond)
	for _, a := range client.Actions() {
		if a.GetResource().Resource == "nodes" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			t.Errorf("node %s while waiting for Ready", a.GetVerb())
		}
	}
	env.rt.set(func(f *fakeRuntime) { f.network = true })
	start := time.Now()
	waitFor(t, "Ready", func() bool {
		n, err := client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
		return err == nil && condition(t, n, v1.NodeReady).Status == v1.ConditionTrue
	})
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Ready posted %v after the network came up: the fast path should take ~100ms", d)
	}

	var lease *coordinationv1.Lease
	waitFor(t, "the lease", func() bool {
		l, err := client.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, "node-a", metav1.GetOptions{})
		lease = l
		return err == nil
	})
	if *lease.Spec.HolderIdentity != "node-a" || *lease.Spec.LeaseDurationSeconds != 40 {
		t.Errorf("lease spec = %+v", lease.Spec)
	}
	want := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "node-a", UID: "node-uid"}}
	if len(lease.OwnerReferences) != 1 || lease.OwnerReferences[0] != want[0] {
		t.Errorf("owner references = %+v, want %+v", lease.OwnerReferences, want)
	}
	first := lease.Spec.RenewTime.Time
	waitFor(t, "a renewal", func() bool {
		l, err := client.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, "node-a", metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime.Time.After(first)
	})

	// Node() follows the apiserver: a label someone adds shows up.
	n, _ := client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
	n.Labels["zone"] = "z1"
	if _, err := client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "Node() to see the new label", func() bool { return env.c.Node().Labels["zone"] == "z1" })
}

func TestRunWithoutRegistrationWaitsForTheNodeForTheLeaseOwner(t *testing.T) {
	client := fake.NewClientset()
	env := newTestController(t, client, func(c *Config) { c.Kubelet.RegisterNode = new(bool) })
	env.realClock()
	env.c.leaseRenew = 20 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); env.c.Run(ctx) }()
	defer func() { cancel(); wg.Wait() }()

	time.Sleep(100 * time.Millisecond)
	if _, err := client.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, "node-a", metav1.GetOptions{}); err == nil {
		t.Fatal("lease created before its owner node exists")
	}
	if _, err := client.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", UID: "u2"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the lease with its owner", func() bool {
		l, err := client.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, "node-a", metav1.GetOptions{})
		return err == nil && len(l.OwnerReferences) == 1 && l.OwnerReferences[0].UID == "u2"
	})
	waitFor(t, "status posted on the existing node", func() bool {
		n, err := client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
		return err == nil && findCondition(n, v1.NodeReady) != nil
	})
}

func TestRunStandalone(t *testing.T) {
	env := newTestController(t, nil, nil)
	env.realClock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); env.c.Run(ctx) }()
	waitFor(t, "the local node", func() bool { return env.c.Node() != nil })
	n := env.c.Node()
	if n.Labels["tier"] != "gold" || n.Labels[v1.LabelHostname] != "node-a" {
		t.Errorf("labels = %v", n.Labels)
	}
	if c := condition(t, n, v1.NodeReady); c.Status != v1.ConditionTrue {
		t.Errorf("Ready = %s: %s", c.Status, c.Message)
	}
	cancel()
	<-done
}

// The Lease and the node status go through the heartbeat client; the
// main client registers and watches the Node, and nothing else.
func TestRunHeartbeatsThroughTheHeartbeatClient(t *testing.T) {
	client := fake.NewClientset()
	giveUIDs(client)
	// A second clientset on the same objects, as a second client of one
	// apiserver.
	heartbeat := &fake.Clientset{}
	heartbeat.AddReactor("*", "*", k8stesting.ObjectReaction(client.Tracker()))
	env := newTestController(t, client, func(c *Config) { c.HeartbeatClient = heartbeat })
	env.realClock()
	env.c.leaseRenew = 50 * time.Millisecond

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); env.c.Run(ctx) }()
	defer func() { cancel(); wg.Wait() }()

	count := func(cs *fake.Clientset, resource, subresource string) int {
		n := 0
		for _, a := range cs.Actions() {
			if a.GetResource().Resource == resource && a.GetSubresource() == subresource {
				n++
			}
		}
		return n
	}
	waitFor(t, "Ready and two lease renewals through the heartbeat client", func() bool {
		n, err := client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
		return err == nil && condition(t, n, v1.NodeReady).Status == v1.ConditionTrue &&
			count(heartbeat, "leases", "") >= 3
	})
	if n := count(heartbeat, "nodes", "status"); n == 0 {
		t.Error("no node status patch through the heartbeat client")
	}
	for _, a := range client.Actions() {
		switch {
		case a.GetResource().Resource == "leases":
			t.Errorf("lease %s through the main client", a.GetVerb())
		case a.GetResource().Resource == "nodes" && a.GetSubresource() == "status":
			t.Errorf("node status %s through the main client", a.GetVerb())
		}
	}
}
