package nodestatus

import (
	"context"
	"slices"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// The Node's volumesInUse follows what the volumes say, posted as soon
// as it changes; volumesAttached, the attach/detach controller's, is
// never overwritten by Skiff's status patches.
func TestVolumesInUsePostedAndVolumesAttachedKept(t *testing.T) {
	client := fake.NewClientset()
	var mu sync.Mutex
	var inUse []v1.UniqueVolumeName
	env := newTestController(t, client, func(c *Config) {
		c.VolumesInUse = func(context.Context) []v1.UniqueVolumeName {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(inUse)
		}
	})
	ctx := context.Background()
	env.c.runtime.update(ctx)
	if !env.c.tryRegister(ctx, env.c.initialNode(ctx)) {
		t.Fatal("registration failed")
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(env.c.syncNodeStatus(ctx))
	vol := v1.UniqueVolumeName("kubernetes.io/csi/disk.csi.test^vol-1")
	// The attach/detach controller attaches the volume.
	n, err := client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
	must(err)
	n.Status.VolumesAttached = []v1.AttachedVolume{{Name: vol, DevicePath: "/dev/vdb"}}
	_, err = client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	must(err)

	for _, want := range [][]v1.UniqueVolumeName{{vol}, nil} {
		mu.Lock()
		inUse = want
		mu.Unlock()
		client.ClearActions()
		must(env.c.syncNodeStatus(ctx))
		if got := patches(client.Actions()); got != 1 {
			t.Errorf("volumesInUse %v: %d status patches, want 1", want, got)
		}
		n, err = client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
		must(err)
		if !slices.Equal(n.Status.VolumesInUse, want) {
			t.Errorf("volumesInUse %v, want %v", n.Status.VolumesInUse, want)
		}
		if len(n.Status.VolumesAttached) != 1 || n.Status.VolumesAttached[0].Name != vol {
			t.Errorf("volumesAttached %v, want the controller's", n.Status.VolumesAttached)
		}
	}
}
