package nodestatus

import (
	"context"
	"reflect"
	goruntime "runtime"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestRegisterNewNode(t *testing.T) {
	client := fake.NewClientset()
	taint := v1.Taint{Key: "dedicated", Value: "skiff", Effect: v1.TaintEffectNoSchedule}
	env := newTestController(t, client, func(c *Config) { c.Kubelet.RegisterWithTaints = []v1.Taint{taint} })
	ctx := context.Background()
	env.c.runtime.update(ctx)
	if !env.c.tryRegister(ctx, env.c.initialNode(ctx)) {
		t.Fatal("registration failed")
	}
	node, err := client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{
		"kubernetes.io/hostname":  "node-a",
		"kubernetes.io/os":        goruntime.GOOS,
		"kubernetes.io/arch":      goruntime.GOARCH,
		"beta.kubernetes.io/os":   goruntime.GOOS,
		"beta.kubernetes.io/arch": goruntime.GOARCH,
		"tier":                    "gold",
	}
	if !reflect.DeepEqual(node.Labels, wantLabels) {
		t.Errorf("labels = %v\nwant %v", node.Labels, wantLabels)
	}
	if node.Annotations[annotationControllerAttach] != "true" {
		t.Errorf("annotations = %v", node.Annotations)
	}
	if !reflect.DeepEqual(node.Spec.Taints, []v1.Taint{taint}) {
		t.Errorf("taints = %v", node.Spec.Taints)
	}
	if c := condition(t, node, v1.NodeReady); c.Status != v1.ConditionTrue {
		t.Errorf("registered with Ready %s: %s", c.Status, c.Message)
	}
	if node.Status.Capacity.Cpu().Value() != 4 || node.Status.Allocatable.Pods().Value() != 110 {
		t.Errorf("status = %+v", node.Status)
	}
	if got := env.c.Node(); got == nil || got.Name != "node-a" {
		t.Errorf("Node() = %v", got)
	}
}

func TestRegisterExistingNodeReconciles(t *testing.T) {
	existing := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: "node-a",
			UID:  "uid-1",
			Labels: map[string]string{
				"kubernetes.io/hostname": "old-name",
				"kubernetes.io/os":       goruntime.GOOS,
				"team":                   "a", // someone else's label: kept
			},
		},
		// Taints are not the kubelet's to reconcile after registration.
		Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: "manual", Effect: v1.TaintEffectNoExecute}}},
		Status: v1.NodeStatus{
			Capacity:    v1.ResourceList{"cpu": q("4"), "hugepages-32Mi": q("64Mi"), "hugepages-2Mi": q("0")},
			Allocatable: v1.ResourceList{"cpu": q("4"), "hugepages-32Mi": q("64Mi"), "hugepages-2Mi": q("0")},
		},
	}
	client := fake.NewClientset(existing)
	env := newTestController(t, client, func(c *Config) {
		c.Kubelet.RegisterWithTaints = []v1.Taint{{Key: "new", Effect: v1.TaintEffectNoSchedule}}
	})
	ctx := context.Background()
	if !env.c.tryRegister(ctx, env.c.initialNode(ctx)) {
		t.Fatal("registration failed")
	}
	node, err := client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if node.Labels["kubernetes.io/hostname"] != "node-a" || node.Labels["beta.kubernetes.io/arch"] != goruntime.GOARCH || node.Labels["team"] != "a" {
		t.Errorf("labels = %v", node.Labels)
	}
	// --node-labels are applied on creation only, as upstream.
	if _, ok := node.Labels["tier"]; ok {
		t.Errorf("labels = %v: node labels are not reconciled", node.Labels)
	}
	if node.Annotations[annotationControllerAttach] != "true" {
		t.Errorf("annotations = %v", node.Annotations)
	}
	if len(node.Spec.Taints) != 1 || node.Spec.Taints[0].Key != "manual" {
		t.Errorf("taints = %v", node.Spec.Taints)
	}
	if _, ok := node.Status.Capacity["hugepages-32Mi"]; ok {
		t.Error("a huge page size the machine no longer has is still reported")
	}
	if hp := node.Status.Capacity["hugepages-2Mi"]; hp.Value() != 512*2*mi {
		t.Errorf("hugepages-2Mi = %s", hp.String())
	}
	if env.c.nodeUID() != "uid-1" {
		t.Errorf("node UID = %q", env.c.nodeUID())
	}
}

func TestRegisterRetriesUntilTheAPIServerAnswers(t *testing.T) {
	client := fake.NewClientset()
	failures := 2
	client.PrependReactor("create", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failures > 0 {
			failures--
			return true, nil, errDown
		}
		return false, nil, nil
	})
	env := newTestController(t, client, nil)
	env.realClock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if !env.c.register(ctx) {
		t.Fatal("register gave up")
	}
	if failures != 0 {
		t.Errorf("%d failures left", failures)
	}
	if _, err := client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{}); err != nil {
		t.Error(err)
	}
	cancel()
	if env.c.register(ctx) {
		t.Error("register succeeded after ctx ended")
	}
}

func TestRegisterProviderIDAndExternalCloudProvider(t *testing.T) {
	own := v1.Taint{Key: "dedicated", Value: "skiff", Effect: v1.TaintEffectNoSchedule}
	uninitialized := v1.Taint{Key: TaintExternalCloudProvider, Value: "true", Effect: v1.TaintEffectNoSchedule}
	hostnameOnly := []v1.NodeAddress{{Type: v1.NodeHostName, Address: "node-a"}}
	detected := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.10"}, {Type: v1.NodeHostName, Address: "node-a"}}
	tests := []struct {
		name           string
		external       bool
		nodeIPs        []string
		wantTaints     []v1.Taint
		wantAddresses  []v1.NodeAddress
		wantAnnotation string
	}{
		{name: "no cloud provider", wantTaints: []v1.Taint{own}, wantAddresses: detected},
		{name: "external, no node IP", external: true, wantTaints: []v1.Taint{own, uninitialized}, wantAddresses: hostnameOnly},
		{name: "external with node IP", external: true, nodeIPs: []string{"192.0.2.10"},
			wantTaints: []v1.Taint{own, uninitialized}, wantAddresses: detected, wantAnnotation: "192.0.2.10"},
		{name: "external, unspecified node IP detects", external: true, nodeIPs: []string{"0.0.0.0"},
			wantTaints: []v1.Taint{own, uninitialized}, wantAddresses: detected},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			env := newTestController(t, client, func(c *Config) {
				c.Kubelet.RegisterWithTaints = []v1.Taint{own}
				c.Kubelet.ProviderID = "kind://docker/kind/node-a"
				c.ExternalCloudProvider = tt.external
				c.NodeIPs = tt.nodeIPs
			})
			ctx := context.Background()
			env.c.runtime.update(ctx)
			if !env.c.tryRegister(ctx, env.c.initialNode(ctx)) {
				t.Fatal("registration failed")
			}
			node, err := client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if node.Spec.ProviderID != "kind://docker/kind/node-a" {
				t.Errorf("providerID = %q", node.Spec.ProviderID)
			}
			if !reflect.DeepEqual(node.Spec.Taints, tt.wantTaints) {
				t.Errorf("taints = %v, want %v", node.Spec.Taints, tt.wantTaints)
			}
			if !reflect.DeepEqual(node.Status.Addresses, tt.wantAddresses) {
				t.Errorf("addresses = %v, want %v", node.Status.Addresses, tt.wantAddresses)
			}
			if got := node.Annotations[annotationProvidedNodeIP]; got != tt.wantAnnotation {
				t.Errorf("%s annotation = %q, want %q", annotationProvidedNodeIP, got, tt.wantAnnotation)
			}
		})
	}
}

// With an external cloud provider the addresses it set are kept.
func TestExternalCloudProviderKeepsProviderAddresses(t *testing.T) {
	env := newTestController(t, fake.NewClientset(), func(c *Config) { c.ExternalCloudProvider = true })
	ctx := context.Background()
	set := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "198.51.100.7"}, {Type: v1.NodeExternalIP, Address: "203.0.113.9"}}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Status: v1.NodeStatus{Addresses: set}}
	env.c.setNodeStatus(ctx, node)
	if !reflect.DeepEqual(node.Status.Addresses, set) {
		t.Errorf("addresses = %v, want the provider's %v", node.Status.Addresses, set)
	}
	env2 := newTestController(t, fake.NewClientset(), nil)
	node2 := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Status: v1.NodeStatus{Addresses: set}}
	env2.c.setNodeStatus(ctx, node2)
	if reflect.DeepEqual(node2.Status.Addresses, set) {
		t.Error("without a cloud provider the kubelet's own addresses must replace others")
	}
}
