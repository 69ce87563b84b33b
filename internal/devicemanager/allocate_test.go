package devicemanager

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

const res = "example.com/dev"

func container(name string, n int64) v1.Container {
	c := v1.Container{Name: name}
	if n > 0 {
		c.Resources.Limits = v1.ResourceList{res: *resource.NewQuantity(n, resource.DecimalSI)}
	}
	return c
}

func pod(uid string, init []v1.Container, cs ...v1.Container) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "ns", UID: types.UID(uid)},
		Spec: v1.PodSpec{InitContainers: init, Containers: cs}}
}

// heldBy returns a container's devices, flattened.
func heldBy(m *Manager, uid, c string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d := m.alloc.get(types.UID(uid), c, res); d != nil {
		return ids(d.ids)
	}
	return nil
}

// An init container's devices go to the app container after it; the
// plugin's preferred devices are taken; what Allocate answered is what
// the container's CRI config gets, after PreStartContainer.
func TestAllocateReusesInitDevicesAndPrefersPlugin(t *testing.T) {
	e := newEnv(t)
	p := newFakePlugin(t, e.dir, "p.sock", dev("a", true), dev("b", true), dev("c", true), dev("d", false))
	p.opts = &pluginapi.DevicePluginOptions{PreStartRequired: true, GetPreferredAllocationAvailable: true}
	p.preferred = []string{"c", "d", "zz"} // an unhealthy and an unknown one are skipped
	p.allocate = func(_ context.Context, ids []string) (*pluginapi.ContainerAllocateResponse, error) {
		return &pluginapi.ContainerAllocateResponse{
			Envs:        map[string]string{"DEV": strings.Join(ids, ",")},
			Mounts:      []*pluginapi.Mount{{ContainerPath: "/dev-state", HostPath: "/tmp/" + ids[0], ReadOnly: true}},
			Devices:     []*pluginapi.DeviceSpec{{ContainerPath: "/dev/x", HostPath: "/dev/null", Permissions: "rw"}},
			Annotations: map[string]string{"example.com/dev": ids[0]},
			CdiDevices:  []*pluginapi.CDIDevice{{Name: "example.com/dev=" + ids[0]}},
		}, nil
	}
	e.mustRegister(res, p)
	e.waitAllocatable(res, 3)
	pd := pod("p1", []v1.Container{container("init", 2)}, container("main", 2), container("plain", 0))
	if err := e.m.Allocate(context.Background(), pd); err != nil {
		t.Fatal(err)
	}
	initDevs, mainDevs := heldBy(e.m, "p1", "init"), heldBy(e.m, "p1", "main")
	if len(initDevs) != 2 || !reflect.DeepEqual(initDevs, mainDevs) {
		t.Errorf("init holds %v, main %v: want main to reuse init's two devices", initDevs, mainDevs)
	}
	if !contains(initDevs, "c") || contains(initDevs, "d") {
		t.Errorf("init got %v: want the preferred healthy c, never the unhealthy d", initDevs)
	}
	got, err := e.m.RunOptions(context.Background(), pd, &pd.Spec.Containers[0])
	if err != nil {
		t.Fatal(err)
	}
	want := &runtimeapi.ContainerConfig{
		Envs:        []*runtimeapi.KeyValue{{Key: "DEV", Value: strings.Join(mainDevs, ",")}},
		Mounts:      []*runtimeapi.Mount{{ContainerPath: "/dev-state", HostPath: "/tmp/" + mainDevs[0], Readonly: true}},
		Devices:     []*runtimeapi.Device{{ContainerPath: "/dev/x", HostPath: "/dev/null", Permissions: "rw"}},
		Annotations: map[string]string{"example.com/dev": mainDevs[0]},
		CDIDevices:  []*runtimeapi.CDIDevice{{Name: "example.com/dev=" + mainDevs[0]}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("RunOptions = %v\nwant %v", got, want)
	}
	if p.preStarts == nil || !reflect.DeepEqual(p.preStarts[0], mainDevs) {
		t.Errorf("PreStartContainer calls %v, want one with %v", p.preStarts, mainDevs)
	}
	if o, err := e.m.RunOptions(context.Background(), pd, &pd.Spec.Containers[1]); err != nil || o != nil {
		t.Errorf("a container without devices got %v, %v", o, err)
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// More devices than are free: upstream's error, and nothing held.
func TestAllocateMoreThanExist(t *testing.T) {
	e := newEnv(t)
	p := newFakePlugin(t, e.dir, "p.sock", dev("a", true), dev("b", true))
	e.mustRegister(res, p)
	e.waitAllocatable(res, 2)
	if err := e.m.Allocate(context.Background(), pod("one", nil, container("main", 1))); err != nil {
		t.Fatal(err)
	}
	err := e.m.Allocate(context.Background(), pod("two", nil, container("main", 2)))
	if err == nil || err.Error() != "requested number of devices unavailable for example.com/dev. Requested: 2, Available: 1" {
		t.Errorf("Allocate: %v, want upstream's unavailable error", err)
	}
	if h := heldBy(e.m, "two", "main"); h != nil {
		t.Errorf("the refused pod holds %v", h)
	}
	if len(p.allocated) != 1 {
		t.Errorf("the plugin saw %d Allocate calls, want 1", len(p.allocated))
	}
}

// A plugin that dies in Allocate, or answers garbage: a clear error, no
// device held, and the devices stay free for the next pod.
func TestAllocateFaults(t *testing.T) {
	e := newEnv(t)
	p := newFakePlugin(t, e.dir, "p.sock", dev("a", true))
	e.mustRegister(res, p)
	e.waitAllocatable(res, 1)
	for _, tc := range []struct {
		name     string
		allocate func(ctx context.Context, ids []string) (*pluginapi.ContainerAllocateResponse, error)
		msg      string
	}{
		{"error", func(context.Context, []string) (*pluginapi.ContainerAllocateResponse, error) {
			return nil, errors.New("device on fire")
		}, "device on fire"},
		{"no answer", func(context.Context, []string) (*pluginapi.ContainerAllocateResponse, error) {
			return nil, nil
		}, "0 container responses"},
		{"relative mount", func(context.Context, []string) (*pluginapi.ContainerAllocateResponse, error) {
			return &pluginapi.ContainerAllocateResponse{Mounts: []*pluginapi.Mount{{ContainerPath: "x", HostPath: "/tmp"}}}, nil
		}, "must be absolute"},
		{"hangs", func(ctx context.Context, _ []string) (*pluginapi.ContainerAllocateResponse, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}, "DeadlineExceeded"},
		{"dies", func(context.Context, []string) (*pluginapi.ContainerAllocateResponse, error) {
			go p.server.Stop()
			time.Sleep(time.Second)
			return nil, errors.New("unreachable")
		}, "Unavailable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := callTimeout
			callTimeout = 200 * time.Millisecond
			defer func() { callTimeout = old }()
			p.mu.Lock()
			p.allocate = tc.allocate
			p.mu.Unlock()
			err := e.m.Allocate(context.Background(), pod(tc.name, nil, container("main", 1)))
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Allocate: %v, want an error mentioning %q", err, tc.msg)
			}
			if h := heldBy(e.m, tc.name, "main"); h != nil {
				t.Errorf("the failed pod holds %v", h)
			}
		})
	}
}

// Assignments survive a restart: the new Manager gives the running pod's
// container the same answer without asking the plugin, and never gives
// its device to another pod, even once the plugin is back.
func TestAssignmentsSurviveRestart(t *testing.T) {
	e := newEnv(t)
	p := newFakePlugin(t, e.dir, "p.sock", dev("a", true), dev("b", true))
	e.mustRegister(res, p)
	e.waitAllocatable(res, 2)
	first := pod("first", nil, container("main", 1))
	if err := e.m.Allocate(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	held := heldBy(e.m, "first", "main")
	before, err := e.m.RunOptions(context.Background(), first, &first.Spec.Containers[0])
	if err != nil {
		t.Fatal(err)
	}
	e.stop()
	p.stop()
	e.start()
	if c, a, _ := e.m.Capacity(); c.Name(res, "").Value() != 0 || a.Name(res, "").Value() != 0 {
		t.Errorf("before the plugin is back: capacity %v allocatable %v, want zero", c, a)
	}
	// Admitted again after the restart: it keeps what it holds.
	if err := e.m.Allocate(context.Background(), first); err != nil {
		t.Fatalf("the running pod is refused after a restart: %v", err)
	}
	after, err := e.m.RunOptions(context.Background(), first, &first.Spec.Containers[0])
	if err != nil || !reflect.DeepEqual(before, after) {
		t.Errorf("RunOptions after the restart = %v, %v; want %v", after, err, before)
	}
	p2 := newFakePlugin(t, e.dir, "p2.sock", dev("a", true), dev("b", true))
	e.mustRegister(res, p2)
	e.waitAllocatable(res, 2)
	if err := e.m.Allocate(context.Background(), pod("second", nil, container("main", 2))); err == nil {
		t.Error("a second pod got both devices: the first pod's was given away")
	}
	if err := e.m.Allocate(context.Background(), pod("third", nil, container("main", 1))); err != nil {
		t.Fatal(err)
	}
	if third := heldBy(e.m, "third", "main"); reflect.DeepEqual(third, held) {
		t.Errorf("the third pod got %v, the first pod's device", third)
	}
}

// Devices of pods no longer active are released at the next allocation,
// but only once every pod source has been heard from; Release frees a
// pod's at once.
func TestReleaseOfInactivePods(t *testing.T) {
	e := newEnv(t)
	p := newFakePlugin(t, e.dir, "p.sock", dev("a", true))
	e.mustRegister(res, p)
	e.waitAllocatable(res, 1)
	if err := e.m.Allocate(context.Background(), pod("gone", nil, container("main", 1))); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Allocate(context.Background(), pod("next", nil, container("main", 1))); err == nil {
		t.Fatal("the pod list is incomplete, yet the absent pod's device was taken")
	}
	e.active = map[types.UID]bool{"next": true}
	if err := e.m.Allocate(context.Background(), pod("next", nil, container("main", 1))); err != nil {
		t.Fatalf("the inactive pod's device was not released: %v", err)
	}
	e.m.Release("next")
	if err := e.m.Allocate(context.Background(), pod("after", nil, container("main", 1))); err != nil {
		t.Fatalf("Release did not free the device: %v", err)
	}
}
