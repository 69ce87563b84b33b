// Package podresources serves the kubelet's pod resources API (v1, and
// v1alpha1's List) on <root-dir>/pod-resources/kubelet.sock, read-only
// over the pods and the device manager, as upstream: List reports the
// active pods, Get any pod Skiff knows, GetAllocatableResources the
// healthy devices. Skiff has no CPU or memory manager, so CPU IDs and
// memory are empty, as upstream reports them with the none policies.
// Dynamic resources are the prepared ResourceClaims each container
// references (with KubeletPodResourcesDynamicResources, on by default
// as upstream 1.34). Calls are rate
// limited as upstream's (100 per second, bursts of 10), answering
// ResourceExhausted beyond.
package podresources

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	podresourcesv1alpha1 "k8s.io/kubelet/pkg/apis/podresources/v1alpha1"
)

const (
	// Dir and SocketName place the socket under the root directory.
	Dir        = "pod-resources"
	SocketName = "kubelet.sock"
	// Upstream's limits (pkg/kubelet/apis/podresources/constants.go).
	defaultQPS   = 100
	defaultBurst = 10
)

// errLimited is upstream's answer past the rate limit.
var errLimited = status.Error(codes.ResourceExhausted, "rejected by rate limit")

// Pods gives the pods to report.
type Pods interface {
	// ActivePods are the admitted pods that have not finished.
	ActivePods() []*v1.Pod
	// AllPods are every pod Skiff knows.
	AllPods() []*v1.Pod
	// PodByName is any pod Skiff knows of that name.
	PodByName(namespace, name string) (*v1.Pod, bool)
}

// Devices gives the devices to report.
type Devices interface {
	ContainerDevices(uid types.UID, container string) []*podresourcesv1.ContainerDevices
	AllocatableDevices() []*podresourcesv1.ContainerDevices
}

// DynamicResources gives the ResourceClaims prepared for a container.
type DynamicResources interface {
	DynamicResources(pod *v1.Pod, container string) []*podresourcesv1.DynamicResource
}

// Gates are the feature gates upstream's API follows (both on by default
// in 1.34).
type Gates struct {
	// Get is KubeletPodResourcesGet: off, Get answers an error.
	Get bool
	// ListActivePods is KubeletPodResourcesListUseActivePods: off, List
	// reports every pod Skiff knows.
	ListActivePods bool
	// DynamicResources is KubeletPodResourcesDynamicResources: off,
	// containers report no dynamic resources.
	DynamicResources bool
}

// Server is the pod resources API.
type Server struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	pods    Pods
	devices Devices
	dynamic DynamicResources
	gates   Gates
}

// New returns the API over pods, devices and dynamic resources.
func New(pods Pods, devices Devices, dynamic DynamicResources, gates Gates) *Server {
	return &Server{pods: pods, devices: devices, dynamic: dynamic, gates: gates}
}

// Listen makes <rootDir>/pod-resources and listens on its socket,
// replacing a stale one.
func Listen(rootDir string) (net.Listener, error) {
	dir := filepath.Join(rootDir, Dir)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("pod resources directory: %w", err)
	}
	sock := filepath.Join(dir, SocketName)
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove old pod resources socket: %w", err)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("pod resources socket: %w", err)
	}
	return l, nil
}

// Serve serves the API on l until ctx ends.
func (s *Server) Serve(ctx context.Context, l net.Listener) {
	limiter := rate.NewLimiter(defaultQPS, defaultBurst)
	g := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if !limiter.Allow() {
			return nil, errLimited
		}
		return h(ctx, req)
	}))
	podresourcesv1.RegisterPodResourcesListerServer(g, s)
	podresourcesv1alpha1.RegisterPodResourcesListerServer(g, v1alpha1{s: s})
	done := make(chan struct{})
	go func() {
		defer close(done)
		klog.InfoS("Serving the pod resources API", "socket", l.Addr().String())
		if err := g.Serve(l); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			klog.ErrorS(err, "Pod resources API server ended")
		}
	}()
	<-ctx.Done()
	g.Stop()
	<-done
}

// List reports the active pods' resources.
func (s *Server) List(ctx context.Context, _ *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	pods := s.pods.ActivePods()
	if !s.gates.ListActivePods {
		pods = s.pods.AllPods()
	}
	out := &podresourcesv1.ListPodResourcesResponse{PodResources: make([]*podresourcesv1.PodResources, 0, len(pods))}
	for _, p := range pods {
		out.PodResources = append(out.PodResources, s.podResources(p))
	}
	return out, nil
}

// Get reports one pod's resources.
func (s *Server) Get(ctx context.Context, req *podresourcesv1.GetPodResourcesRequest) (*podresourcesv1.GetPodResourcesResponse, error) {
	if !s.gates.Get {
		return nil, errors.New("PodResources API Get method disabled")
	}
	p, ok := s.pods.PodByName(req.PodNamespace, req.PodName)
	if !ok {
		return nil, fmt.Errorf("pod %s in namespace %s not found", req.PodName, req.PodNamespace)
	}
	return &podresourcesv1.GetPodResourcesResponse{PodResources: s.podResources(p)}, nil
}

// GetAllocatableResources reports the node's healthy devices.
func (s *Server) GetAllocatableResources(ctx context.Context, _ *podresourcesv1.AllocatableResourcesRequest) (*podresourcesv1.AllocatableResourcesResponse, error) {
	return &podresourcesv1.AllocatableResourcesResponse{Devices: s.devices.AllocatableDevices()}, nil
}

// podResources lists the pod's sidecars (restartable init containers)
// and containers, as upstream: other init containers are not reported.
func (s *Server) podResources(p *v1.Pod) *podresourcesv1.PodResources {
	out := &podresourcesv1.PodResources{Name: p.Name, Namespace: p.Namespace,
		Containers: make([]*podresourcesv1.ContainerResources, 0, len(p.Spec.InitContainers)+len(p.Spec.Containers))}
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			out.Containers = append(out.Containers, s.container(p, c.Name))
		}
	}
	for _, c := range p.Spec.Containers {
		out.Containers = append(out.Containers, s.container(p, c.Name))
	}
	return out
}

func (s *Server) container(p *v1.Pod, name string) *podresourcesv1.ContainerResources {
	out := &podresourcesv1.ContainerResources{Name: name, Devices: s.devices.ContainerDevices(p.UID, name)}
	if s.gates.DynamicResources {
		out.DynamicResources = s.dynamic.DynamicResources(p, name)
	}
	return out
}
