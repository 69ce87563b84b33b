package devicemanager

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	testclock "k8s.io/utils/clock/testing"
)

// fakePlugin is a device plugin on a real socket, doing what a test says.
type fakePlugin struct {
	pluginapi.UnimplementedDevicePluginServer
	t        *testing.T
	name     string // socket name in the manager's directory
	sock     string
	server   *grpc.Server
	opts     *pluginapi.DevicePluginOptions
	updates  chan []*pluginapi.Device // sent on the open ListAndWatch
	endWatch chan struct{}            // ends the open ListAndWatch, plugin still up

	mu        sync.Mutex
	devices   []*pluginapi.Device // first answer of every ListAndWatch
	watches   int
	allocated [][]string
	preStarts [][]string
	preferred []string // GetPreferredAllocation's answer
	allocate  func(ctx context.Context, ids []string) (*pluginapi.ContainerAllocateResponse, error)
}

func newFakePlugin(t *testing.T, dir, name string, devs ...*pluginapi.Device) *fakePlugin {
	t.Helper()
	p := &fakePlugin{t: t, name: name, sock: filepath.Join(dir, name), opts: &pluginapi.DevicePluginOptions{},
		updates: make(chan []*pluginapi.Device), endWatch: make(chan struct{}), devices: devs}
	p.start()
	t.Cleanup(p.stop)
	return p
}

func (p *fakePlugin) start() {
	p.t.Helper()
	l, err := net.Listen("unix", p.sock)
	if err != nil {
		p.t.Fatal(err)
	}
	p.server = grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(p.server, p)
	go func() { _ = p.server.Serve(l) }()
}

// stop ends the plugin as a crash would: server gone, socket removed.
func (p *fakePlugin) stop() {
	p.server.Stop()
	_ = os.Remove(p.sock)
}

func (p *fakePlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return p.opts, nil
}

func (p *fakePlugin) ListAndWatch(_ *pluginapi.Empty, s pluginapi.DevicePlugin_ListAndWatchServer) error {
	p.mu.Lock()
	p.watches++
	devs := p.devices
	p.mu.Unlock()
	if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
		return err
	}
	for {
		select {
		case d := <-p.updates:
			if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: d}); err != nil {
				return err
			}
		case <-p.endWatch:
			return nil
		case <-s.Context().Done():
			return nil
		}
	}
}

func (p *fakePlugin) GetPreferredAllocation(context.Context, *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return &pluginapi.PreferredAllocationResponse{ContainerResponses: []*pluginapi.ContainerPreferredAllocationResponse{{DeviceIDs: p.preferred}}}, nil
}

func (p *fakePlugin) Allocate(ctx context.Context, r *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	ids := r.ContainerRequests[0].DevicesIds
	p.mu.Lock()
	p.allocated = append(p.allocated, ids)
	f := p.allocate
	p.mu.Unlock()
	if f == nil {
		f = func(_ context.Context, ids []string) (*pluginapi.ContainerAllocateResponse, error) {
			return &pluginapi.ContainerAllocateResponse{Envs: map[string]string{"DEVICES": ids[0]}}, nil
		}
	}
	resp, err := f(ctx, ids)
	if err != nil || resp == nil {
		return nil, err
	}
	return &pluginapi.AllocateResponse{ContainerResponses: []*pluginapi.ContainerAllocateResponse{resp}}, nil
}

func (p *fakePlugin) PreStartContainer(_ context.Context, r *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.preStarts = append(p.preStarts, r.DevicesIds)
	return &pluginapi.PreStartContainerResponse{}, nil
}

func (p *fakePlugin) watchCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.watches
}

// env is a running Manager on a directory of its own, with a fake clock.
type env struct {
	t      *testing.T
	dir    string
	m      *Manager
	clock  *testclock.FakeClock
	active map[types.UID]bool // nil: the pod list is not complete
	cancel context.CancelFunc
	done   chan struct{}
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir, err := os.MkdirTemp("", "dm") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	e := &env{t: t, dir: dir, clock: testclock.NewFakeClock(time.Now())}
	e.start()
	return e
}

// start runs a Manager on the directory, as Skiff's start does.
func (e *env) start() {
	e.t.Helper()
	m, err := New(Config{Dir: e.dir, Clock: e.clock, Active: func() (map[types.UID]bool, bool) {
		return e.active, e.active != nil
	}})
	if err != nil {
		e.t.Fatal(err)
	}
	m.reopenBackoff = 10 * time.Millisecond
	l, err := m.Listen()
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.m, e.cancel, e.done = m, cancel, make(chan struct{})
	go func() { m.Run(ctx, l); close(e.done) }()
	e.t.Cleanup(e.stop)
}

func (e *env) stop() {
	if e.cancel != nil {
		e.cancel()
		<-e.done
		e.cancel = nil
	}
}

// register registers a plugin through the registration socket, as a
// plugin does.
func (e *env) register(req *pluginapi.RegisterRequest) error {
	e.t.Helper()
	conn, err := grpc.NewClient("unix://"+filepath.Join(e.dir, SocketName), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if req.Version == "" {
		req.Version = pluginapi.Version
	}
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, req)
	return err
}

func (e *env) mustRegister(resource string, p *fakePlugin) {
	e.t.Helper()
	if err := e.register(&pluginapi.RegisterRequest{ResourceName: resource, Endpoint: p.name}); err != nil {
		e.t.Fatalf("register %s: %v", resource, err)
	}
}

// waitAllocatable waits for the resource's allocatable count.
func (e *env) waitAllocatable(resource string, want int64) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, a, _ := e.m.Capacity()
		q, ok := a[v1.ResourceName(resource)]
		if ok && q.Value() == want {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("allocatable %s = %v, want %d", resource, a, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func dev(id string, healthy bool) *pluginapi.Device {
	h := pluginapi.Healthy
	if !healthy {
		h = pluginapi.Unhealthy
	}
	return &pluginapi.Device{ID: id, Health: h}
}
