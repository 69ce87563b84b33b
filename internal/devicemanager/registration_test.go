package devicemanager

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Registrations Skiff must refuse, each with its own clear error, before
// anything is dialled.
func TestRegistrationRefusesBadInput(t *testing.T) {
	e := newEnv(t)
	p := newFakePlugin(t, e.dir, "good.sock", dev("a", true))
	if err := os.Symlink(p.sock, filepath.Join(e.dir, "link.sock")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		req  *pluginapi.RegisterRequest
		code codes.Code
		msg  string
	}{
		{"old version", &pluginapi.RegisterRequest{Version: "v1alpha", ResourceName: "example.com/dev", Endpoint: "good.sock"}, codes.InvalidArgument, "unsupported device plugin API version"},
		{"no domain", &pluginapi.RegisterRequest{ResourceName: "gpu", Endpoint: "good.sock"}, codes.InvalidArgument, "invalid resource name"},
		{"native domain", &pluginapi.RegisterRequest{ResourceName: "kubernetes.io/gpu", Endpoint: "good.sock"}, codes.InvalidArgument, "invalid resource name"},
		{"garbage name", &pluginapi.RegisterRequest{ResourceName: "example.com/has space", Endpoint: "good.sock"}, codes.InvalidArgument, "invalid resource name"},
		{"escaping endpoint", &pluginapi.RegisterRequest{ResourceName: "example.com/dev", Endpoint: "../good.sock"}, codes.InvalidArgument, "invalid endpoint"},
		{"kubelet's socket", &pluginapi.RegisterRequest{ResourceName: "example.com/dev", Endpoint: SocketName}, codes.InvalidArgument, "invalid endpoint"},
		{"no socket", &pluginapi.RegisterRequest{ResourceName: "example.com/dev", Endpoint: "missing.sock"}, codes.Unavailable, "missing.sock"},
		{"symlink", &pluginapi.RegisterRequest{ResourceName: "example.com/dev", Endpoint: "link.sock"}, codes.Unavailable, "link.sock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := e.register(tc.req)
			if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Register: %v, want %s mentioning %q", err, tc.code, tc.msg)
			}
		})
	}
	if c, _, _ := e.m.Capacity(); len(c) != 0 {
		t.Errorf("refused registrations left resources: %v", c)
	}
}

// A second plugin cannot take a resource whose plugin still answers; once
// that one is gone (a restarted plugin), it can.
func TestRegisteringTwice(t *testing.T) {
	e := newEnv(t)
	first := newFakePlugin(t, e.dir, "first.sock", dev("a", true))
	e.mustRegister("example.com/dev", first)
	second := newFakePlugin(t, e.dir, "second.sock", dev("b", true), dev("c", true))
	err := e.register(&pluginapi.RegisterRequest{ResourceName: "example.com/dev", Endpoint: "second.sock"})
	if status.Code(err) != codes.AlreadyExists || !strings.Contains(err.Error(), "first.sock") {
		t.Fatalf("second registration: %v, want AlreadyExists naming first.sock", err)
	}
	e.waitAllocatable("example.com/dev", 1)
	first.stop()
	e.mustRegister("example.com/dev", second)
	e.waitAllocatable("example.com/dev", 2)
	// The same plugin registering again (its endpoint) is taken as is.
	e.mustRegister("example.com/dev", second)
	e.waitAllocatable("example.com/dev", 2)
}

// Capacity counts every device, allocatable the healthy ones; a plugin
// gone leaves capacity but no allocatable, until the grace period ends
// and the resource is reported removed, once.
func TestCapacityFollowsPlugin(t *testing.T) {
	e := newEnv(t)
	p := newFakePlugin(t, e.dir, "p.sock", dev("a", true), dev("b", true), dev("c", false))
	e.mustRegister("example.com/dev", p)
	e.waitAllocatable("example.com/dev", 2)
	if c, _, _ := e.m.Capacity(); c.Name("example.com/dev", "").Value() != 3 {
		t.Errorf("capacity %v, want 3", c)
	}
	p.updates <- []*pluginapi.Device{dev("a", true), dev("b", false), dev("c", false)}
	e.waitAllocatable("example.com/dev", 1)
	p.stop()
	e.waitAllocatable("example.com/dev", 0)
	if c, _, removed := e.m.Capacity(); c.Name("example.com/dev", "").Value() != 3 || len(removed) != 0 {
		t.Errorf("within the grace period: capacity %v, removed %v; want 3 and none", c, removed)
	}
	e.clock.Step(gracePeriod + time.Second)
	c, _, removed := e.m.Capacity()
	if _, ok := c["example.com/dev"]; ok || len(removed) != 1 || removed[0] != "example.com/dev" {
		t.Errorf("after the grace period: capacity %v, removed %v; want it removed", c, removed)
	}
	if _, _, removed := e.m.Capacity(); len(removed) != 0 {
		t.Errorf("removed reported twice: %v", removed)
	}
}

// A device list no hardware gives is ignored; the last good one stays.
func TestGarbageDeviceListsIgnored(t *testing.T) {
	e := newEnv(t)
	p := newFakePlugin(t, e.dir, "p.sock", dev("a", true), dev("b", true))
	e.mustRegister("example.com/dev", p)
	e.waitAllocatable("example.com/dev", 2)
	huge := make([]*pluginapi.Device, maxDevices+1)
	for i := range huge {
		huge[i] = dev(fmt.Sprint("d", i), true)
	}
	for _, bad := range [][]*pluginapi.Device{
		{dev("a", true), dev("a", true)},
		{dev("", true)},
		{{ID: "z", Health: "Sort of"}},
		huge,
	} {
		p.updates <- bad
	}
	// A good list after them is taken: the bad ones came first.
	p.updates <- []*pluginapi.Device{dev("a", true), dev("b", true), dev("c", true)}
	e.waitAllocatable("example.com/dev", 3)
	if c, _, _ := e.m.Capacity(); c.Name("example.com/dev", "").Value() != 3 {
		t.Errorf("capacity %v after garbage, want 3", c)
	}
}

// A ListAndWatch stream that ends while the plugin still serves is opened
// again; the devices stay allocatable.
func TestListAndWatchReopened(t *testing.T) {
	e := newEnv(t)
	p := newFakePlugin(t, e.dir, "p.sock", dev("a", true))
	e.mustRegister("example.com/dev", p)
	e.waitAllocatable("example.com/dev", 1)
	p.endWatch <- struct{}{}
	deadline := time.Now().Add(10 * time.Second)
	for p.watchCount() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("ListAndWatch opened %d times, want it opened again", p.watchCount())
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.waitAllocatable("example.com/dev", 1)
}

// Every start removes the old sockets and makes kubelet.sock again.
func TestStartRemovesOldSockets(t *testing.T) {
	e := newEnv(t)
	p := newFakePlugin(t, e.dir, "p.sock", dev("a", true))
	e.stop()
	e.start()
	if _, err := os.Lstat(p.sock); !os.IsNotExist(err) {
		t.Errorf("a plugin socket survived the start: %v", err)
	}
	if fi, err := os.Lstat(filepath.Join(e.dir, SocketName)); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("kubelet.sock not made again: %v", err)
	}
}
