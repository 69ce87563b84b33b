package podresources

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	podresourcesv1alpha1 "k8s.io/kubelet/pkg/apis/podresources/v1alpha1"
)

type fakePods struct{ active, all []*v1.Pod }

func (f fakePods) ActivePods() []*v1.Pod { return f.active }
func (f fakePods) AllPods() []*v1.Pod    { return f.all }
func (f fakePods) PodByName(ns, name string) (*v1.Pod, bool) {
	for _, p := range f.all {
		if p.Namespace == ns && p.Name == name {
			return p, true
		}
	}
	return nil, false
}

type fakeDevices map[string][]*podresourcesv1.ContainerDevices // uid/container

func (f fakeDevices) ContainerDevices(uid types.UID, c string) []*podresourcesv1.ContainerDevices {
	return f[string(uid)+"/"+c]
}
func (f fakeDevices) AllocatableDevices() []*podresourcesv1.ContainerDevices { return f["allocatable"] }

func cd(id string) *podresourcesv1.ContainerDevices {
	return &podresourcesv1.ContainerDevices{ResourceName: "example.com/dev", DeviceIds: []string{id}}
}

// serve starts the API on a socket under a fresh root and dials it.
func serve(t *testing.T, s *Server) *grpc.ClientConn {
	t.Helper()
	root, err := os.MkdirTemp("", "pr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	l, err := Listen(root)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Serve(ctx, l); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	conn, err := grpc.NewClient("unix://"+filepath.Join(root, Dir, SocketName), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func TestListGetAllocatable(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	running := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gpu", Namespace: "ns", UID: "u1"}, Spec: v1.PodSpec{
		InitContainers: []v1.Container{{Name: "setup"}, {Name: "sidecar", RestartPolicy: &always}},
		Containers:     []v1.Container{{Name: "main"}},
	}}
	done := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "done", Namespace: "ns", UID: "u2"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main"}}}}
	devs := fakeDevices{"u1/main": {cd("a")}, "u1/sidecar": {cd("b")}, "allocatable": {cd("a"), cd("b"), cd("c")}}
	pods := fakePods{active: []*v1.Pod{running}, all: []*v1.Pod{running, done}}
	conn := serve(t, New(pods, devs, nil, Gates{Get: true, ListActivePods: true}))
	c := podresourcesv1.NewPodResourcesListerClient(conn)
	ctx := context.Background()

	list, err := c.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := &podresourcesv1.PodResources{Name: "gpu", Namespace: "ns", Containers: []*podresourcesv1.ContainerResources{
		{Name: "sidecar", Devices: []*podresourcesv1.ContainerDevices{cd("b")}},
		{Name: "main", Devices: []*podresourcesv1.ContainerDevices{cd("a")}},
	}}
	if len(list.PodResources) != 1 || !proto.Equal(list.PodResources[0], want) {
		t.Errorf("List = %v\nwant only %v (active pods, sidecars but not init containers)", list.PodResources, want)
	}
	got, err := c.Get(ctx, &podresourcesv1.GetPodResourcesRequest{PodName: "done", PodNamespace: "ns"})
	if err != nil || got.PodResources.Name != "done" || len(got.PodResources.Containers) != 1 {
		t.Errorf("Get of a known, finished pod = %v, %v", got, err)
	}
	if _, err := c.Get(ctx, &podresourcesv1.GetPodResourcesRequest{PodName: "nope", PodNamespace: "ns"}); err == nil {
		t.Error("Get of an unknown pod succeeded")
	}
	alloc, err := c.GetAllocatableResources(ctx, &podresourcesv1.AllocatableResourcesRequest{})
	if err != nil || len(alloc.Devices) != 3 || len(alloc.CpuIds) != 0 || len(alloc.Memory) != 0 {
		t.Errorf("GetAllocatableResources = %v, %v; want 3 devices, no CPUs or memory", alloc, err)
	}
	old, err := podresourcesv1alpha1.NewPodResourcesListerClient(conn).List(ctx, &podresourcesv1alpha1.ListPodResourcesRequest{})
	if err != nil || len(old.PodResources) != 2 {
		t.Errorf("v1alpha1 List = %v, %v; want every known pod", old, err)
	}
}

// Past upstream's burst, calls are refused with ResourceExhausted.
func TestRateLimited(t *testing.T) {
	c := podresourcesv1.NewPodResourcesListerClient(serve(t, New(fakePods{}, fakeDevices{}, nil, Gates{})))
	limited := 0
	for range 200 {
		_, err := c.List(context.Background(), &podresourcesv1.ListPodResourcesRequest{})
		if status.Code(err) == codes.ResourceExhausted {
			limited++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if limited == 0 {
		t.Error("200 calls in a row were all answered: no rate limit")
	}
}

// With the gates off, as upstream: Get refused, List of every pod.
func TestGatesOff(t *testing.T) {
	pods := fakePods{all: []*v1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "done", Namespace: "ns"}}}}
	c := podresourcesv1.NewPodResourcesListerClient(serve(t, New(pods, fakeDevices{}, nil, Gates{})))
	list, err := c.List(context.Background(), &podresourcesv1.ListPodResourcesRequest{})
	if err != nil || len(list.PodResources) != 1 {
		t.Errorf("List with KubeletPodResourcesListUseActivePods off = %v, %v; want the finished pod too", list, err)
	}
	if _, err := c.Get(context.Background(), &podresourcesv1.GetPodResourcesRequest{PodName: "done", PodNamespace: "ns"}); err == nil ||
		!strings.Contains(err.Error(), "Get method disabled") {
		t.Errorf("Get with KubeletPodResourcesGet off: %v, want refused", err)
	}
}
