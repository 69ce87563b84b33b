package dra

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"testing"

	"google.golang.org/grpc"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"

	"github.com/skiff-sh/skiff/internal/pluginwatcher"
)

// fakeDriver is a DRA driver on a unix socket that records its calls and
// prepares one device per claim, with the CDI ID vendor.com/dev=<claim>.
type fakeDriver struct {
	drapbv1.UnimplementedDRAPluginServer
	mu         sync.Mutex
	prepared   map[string]int // claim UID → NodePrepareResources calls
	unprepared map[string]int
	fail       string // a claim error to answer, if set
	// hang, if set, holds NodePrepareResources until it is closed or
	// the call's context ends, as a frozen driver.
	hang   chan struct{}
	hangs  int // calls held by hang
	server *grpc.Server
}

// startFakeDriver serves the driver on service (v1 or v1beta1) and
// registers it as name in d.
func startFakeDriver(t *testing.T, d *Drivers, name, service string) *fakeDriver {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "dra.sock")
	f := serveFakeDriver(t, sock, service)
	info := pluginwatcher.Info{Type: "DRAPlugin", Name: name, Endpoint: sock, Versions: []string{service}}
	if err := d.Validate(info); err != nil {
		t.Fatal(err)
	}
	if err := d.Register(context.Background(), info); err != nil {
		t.Fatal(err)
	}
	return f
}

// serveFakeDriver serves a driver on the socket, not registered.
func serveFakeDriver(t *testing.T, sock, service string) *fakeDriver {
	t.Helper()
	f := &fakeDriver{prepared: map[string]int{}, unprepared: map[string]int{}}
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	f.server = g
	if service == drapbv1.DRAPluginService {
		drapbv1.RegisterDRAPluginServer(g, f)
	} else {
		drapbv1beta1.RegisterDRAPluginServer(g, drapbv1beta1.V1ServerWrapper{DRAPluginServer: f})
	}
	go func() { _ = g.Serve(l) }()
	t.Cleanup(g.Stop)
	return f
}

func (f *fakeDriver) NodePrepareResources(ctx context.Context, req *drapbv1.NodePrepareResourcesRequest) (*drapbv1.NodePrepareResourcesResponse, error) {
	f.mu.Lock()
	hang := f.hang
	if hang != nil {
		f.hangs++
	}
	f.mu.Unlock()
	if hang != nil {
		select {
		case <-hang:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &drapbv1.NodePrepareResourcesResponse{Claims: map[string]*drapbv1.NodePrepareResourceResponse{}}
	for _, c := range req.Claims {
		f.prepared[c.UID]++
		if f.fail != "" {
			resp.Claims[c.UID] = &drapbv1.NodePrepareResourceResponse{Error: f.fail}
			continue
		}
		resp.Claims[c.UID] = &drapbv1.NodePrepareResourceResponse{Devices: []*drapbv1.Device{{
			PoolName: "pool", DeviceName: "dev-" + c.Name, RequestNames: []string{"req"},
			CDIDeviceIDs: []string{"vendor.com/dev=" + c.Name},
		}}}
	}
	return resp, nil
}

func (f *fakeDriver) NodeUnprepareResources(_ context.Context, req *drapbv1.NodeUnprepareResourcesRequest) (*drapbv1.NodeUnprepareResourcesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &drapbv1.NodeUnprepareResourcesResponse{Claims: map[string]*drapbv1.NodeUnprepareResourceResponse{}}
	for _, c := range req.Claims {
		f.unprepared[c.UID]++
		resp.Claims[c.UID] = &drapbv1.NodeUnprepareResourceResponse{}
	}
	return resp, nil
}

func (f *fakeDriver) calls(uid string) (prepare, unprepare int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.prepared[uid], f.unprepared[uid]
}

// fakeClaims is an apiserver's ResourceClaims.
type fakeClaims map[string]*resourceapi.ResourceClaim // by namespace/name

func (f fakeClaims) Get(_ context.Context, namespace, name string) (*resourceapi.ResourceClaim, error) {
	if c, ok := f[namespace+"/"+name]; ok {
		return c.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaims"}, name)
}
