package nodestatus

import (
	"context"
	"reflect"
	goruntime "runtime"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodCIDRHandedToRuntimeOncePerChange(t *testing.T) {
	env := newTestController(t, nil, nil)
	ctx := context.Background()
	env.c.runtime.update(ctx)
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{
		v1.LabelOSStable: goruntime.GOOS, v1.LabelArchStable: goruntime.GOARCH,
	}}}
	env.c.setNodeStatus(ctx, node)

	if _, changed := env.c.updateNode(ctx, node); changed {
		t.Error("no pod CIDR, nothing changed: want no change")
	}
	node.Spec.PodCIDRs = []string{"10.244.1.0/24", "fd00:1::/64"}
	if _, changed := env.c.updateNode(ctx, node); !changed {
		t.Error("new pod CIDR: want a change")
	}
	if _, changed := env.c.updateNode(ctx, node); changed {
		t.Error("same pod CIDR: want no change")
	}
	node.Spec.PodCIDRs = []string{"10.244.2.0/24"}
	env.rt.set(func(f *fakeRuntime) { f.cidrErr = errDown })
	env.c.updateNode(ctx, node)
	env.rt.set(func(f *fakeRuntime) { f.cidrErr = nil })
	env.c.updateNode(ctx, node) // the failed call is retried
	env.c.updateNode(ctx, node)
	want := []string{"10.244.1.0/24,fd00:1::/64", "10.244.2.0/24", "10.244.2.0/24"}
	if got := env.rt.podCIDRCalls(); !reflect.DeepEqual(got, want) {
		t.Errorf("UpdateRuntimeConfig calls = %q, want %q", got, want)
	}
}

func TestSetRuntimePodCIDR(t *testing.T) {
	rt := newFakeRuntime()
	if err := SetRuntimePodCIDR(context.Background(), rt, "10.88.0.0/16"); err != nil {
		t.Fatal(err)
	}
	rt.cidrErr = errDown
	if err := SetRuntimePodCIDR(context.Background(), rt, "10.88.0.0/16"); err == nil {
		t.Error("want the runtime's error")
	}
	if got := rt.podCIDRCalls(); len(got) != 2 || got[0] != "10.88.0.0/16" {
		t.Errorf("calls = %q", got)
	}
}
