package kubelet

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/config"
)

const regDriver = "reg.example.com"

// regDriverServer is a DRA driver with its registration socket: it
// prepares every claim with no device and counts the calls.
type regDriverServer struct {
	drapbv1.UnimplementedDRAPluginServer
	registerapi.UnimplementedRegistrationServer
	endpoint string
	mu       sync.Mutex
	prepares int
}

func (s *regDriverServer) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.DRAPlugin, Name: regDriver, Endpoint: s.endpoint,
		SupportedVersions: []string{drapbv1.DRAPluginService}}, nil
}

func (s *regDriverServer) NotifyRegistrationStatus(context.Context, *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	return &registerapi.RegistrationStatusResponse{}, nil
}

func (s *regDriverServer) NodePrepareResources(_ context.Context, req *drapbv1.NodePrepareResourcesRequest) (*drapbv1.NodePrepareResourcesResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prepares++
	resp := &drapbv1.NodePrepareResourcesResponse{Claims: map[string]*drapbv1.NodePrepareResourceResponse{}}
	for _, c := range req.Claims {
		resp.Claims[c.UID] = &drapbv1.NodePrepareResourceResponse{}
	}
	return resp, nil
}

func (s *regDriverServer) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.prepares
}

// serveRegDriver serves the driver on a socket of its own, and its
// registration socket in the kubelet's plugin registry.
func serveRegDriver(t *testing.T, registry string) *regDriverServer {
	t.Helper()
	s := &regDriverServer{endpoint: filepath.Join(t.TempDir(), "dra.sock")}
	for sock, register := range map[string]func(*grpc.Server){
		s.endpoint:                          func(g *grpc.Server) { drapbv1.RegisterDRAPluginServer(g, s) },
		filepath.Join(registry, "reg.sock"): func(g *grpc.Server) { registerapi.RegisterRegistrationServer(g, s) },
	} {
		if err := os.MkdirAll(filepath.Dir(sock), 0o750); err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		g := grpc.NewServer()
		register(g)
		go func() { _ = g.Serve(l) }()
		t.Cleanup(g.Stop)
	}
	return s
}

// A pod whose claim waits for a DRA driver not registered yet is synced
// again as soon as the driver registers, not after the pod worker's
// error back-off.
func TestDRADriverRegistrationEndsBackOff(t *testing.T) {
	m := newMachine(t)
	k, _ := m.start()
	pod := newPod("gpu")
	pod.UID = "gpu-uid"
	pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("c1")}}
	pod.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "c1", UID: "c1-uid"}}
	claim.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
		Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: regDriver, Pool: "p", Device: "d"}},
	}}
	claim.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}}
	if _, err := m.client.ResourceV1().ResourceClaims("default").Create(context.Background(), claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	m.createPod(pod)
	m.eventually("the pod waiting for the driver", func() bool {
		return slices.Equal(k.dra.WaitingFor(regDriver), []types.UID{pod.UID})
	})
	// The first retries come early (the pod's own status updates wake
	// its worker); wait past them for one the back-off made, after which
	// the next is a whole back-off away.
	attempts := func() uint64 { return histogramCount(t, k, "dra_operations_duration_seconds") }
	n := attempts()
	m.eventually("two more attempts to prepare", func() bool { return attempts() >= n+2 })
	failed := m.clock.Now()

	drv := serveRegDriver(t, filepath.Join(m.root, "kubelet", "plugins_registry"))
	for m.clock.Since(failed) < errorBackOffPeriod/2 {
		if m.settle(func() bool { return drv.calls() > 0 }) {
			m.waitPod(pod.Name, "running", running)
			return
		}
		m.clock.Step(tick)
	}
	t.Fatalf("the pod was not synced again within half its back-off (%v) of the driver's registration", errorBackOffPeriod)
}

// The DRA gates whose features Skiff lacks are named when turned on,
// and only then.
func TestDRAGatesWithoutEffect(t *testing.T) {
	for _, tc := range []struct {
		gates map[string]bool
		want  []string
	}{
		{nil, nil},
		{map[string]bool{"ResourceHealthStatus": true}, []string{"ResourceHealthStatus"}},
		{map[string]bool{"ResourceHealthStatus": true, "DRAExtendedResource": true}, []string{"ResourceHealthStatus", "DRAExtendedResource"}},
	} {
		fg, err := config.FeatureGate(tc.gates)
		if err != nil {
			t.Fatal(err)
		}
		if got := draGatesWithoutEffect(fg); !slices.Equal(got, tc.want) {
			t.Errorf("gates %v: %v, want %v", tc.gates, got, tc.want)
		}
	}
}
