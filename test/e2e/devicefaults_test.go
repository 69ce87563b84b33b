//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// faultyResource is the resource of the tests' misbehaving plugins.
const faultyResource = "e2e.skiff.sh/faulty"

// faultyPlugin is a device plugin served from the test process on a
// socket in a node's registration directory, misbehaving as the test
// says: it answers ListAndWatch with what the test sends, and Allocate
// with what allocate returns.
type faultyPlugin struct {
	pluginapi.UnimplementedDevicePluginServer
	t         *testing.T
	dir, sock string
	server    *grpc.Server
	lists     chan []*pluginapi.Device // sent on the open ListAndWatch

	mu       sync.Mutex
	watches  int // ListAndWatch calls
	allocate func(ctx context.Context) (*pluginapi.AllocateResponse, error)
}

// startFaultyPlugin serves a plugin on dir/name and registers it with
// the kubelet there; its first device list is devs.
func startFaultyPlugin(t *testing.T, dir, name string, devs ...*pluginapi.Device) *faultyPlugin {
	t.Helper()
	p := serveFaultyPlugin(t, dir, name, devs...)
	must(t, p.register())
	return p
}

// serveFaultyPlugin serves a plugin on dir/name, not registered yet.
func serveFaultyPlugin(t *testing.T, dir, name string, devs ...*pluginapi.Device) *faultyPlugin {
	t.Helper()
	p := &faultyPlugin{t: t, dir: dir, sock: filepath.Join(dir, name), lists: make(chan []*pluginapi.Device, 8)}
	p.lists <- devs
	l, err := net.Listen("unix", p.sock)
	must(t, err)
	p.server = grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(p.server, p)
	go func() { _ = p.server.Serve(l) }()
	t.Cleanup(p.kill)
	return p
}

// register registers the plugin with the kubelet's registration socket.
func (p *faultyPlugin) register() error {
	conn, err := grpc.NewClient("unix://"+filepath.Join(p.dir, filepath.Base(pluginapi.KubeletSocket)),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: filepath.Base(p.sock), ResourceName: faultyResource,
		Options: &pluginapi.DevicePluginOptions{},
	})
	return err
}

// kill ends the plugin as a crash would: connections cut, socket gone.
func (p *faultyPlugin) kill() {
	p.server.Stop()
	_ = os.Remove(p.sock)
}

func (p *faultyPlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

func (p *faultyPlugin) ListAndWatch(_ *pluginapi.Empty, s pluginapi.DevicePlugin_ListAndWatchServer) error {
	p.mu.Lock()
	p.watches++
	p.mu.Unlock()
	for {
		select {
		case <-s.Context().Done():
			return s.Context().Err()
		case devs := <-p.lists:
			if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
				return err
			}
		}
	}
}

func (p *faultyPlugin) Allocate(ctx context.Context, r *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	p.mu.Lock()
	allocate := p.allocate
	p.mu.Unlock()
	if allocate != nil {
		return allocate(ctx)
	}
	out := &pluginapi.AllocateResponse{}
	for _, c := range r.ContainerRequests {
		out.ContainerResponses = append(out.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{"FAULTY_DEVICES": strings.Join(c.DevicesIds, ",")},
		})
	}
	return out, nil
}

func (p *faultyPlugin) setAllocate(f func(ctx context.Context) (*pluginapi.AllocateResponse, error)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.allocate = f
}

func (p *faultyPlugin) watchCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.watches
}

func faultyDevices(healthy bool, ids ...string) []*pluginapi.Device {
	health := pluginapi.Healthy
	if !healthy {
		health = pluginapi.Unhealthy
	}
	var out []*pluginapi.Device
	for _, id := range ids {
		out = append(out, &pluginapi.Device{ID: id, Health: health})
	}
	return out
}

// waitRefused waits for the pod to fail admission as upstream fails a
// pod that cannot have its devices, and returns its message.
func (cn *clusterNode) waitRefused(t *testing.T, name string) string {
	t.Helper()
	p := cn.waitPod(t, cn.ns, name, 60*time.Second, "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if p.Status.Reason != "UnexpectedAdmissionError" {
		t.Errorf("pod %s: %s %q, want UnexpectedAdmissionError", name, p.Status.Reason, p.Status.Message)
	}
	return p.Status.Message
}

// maxCapacitySeen records the largest capacity of the faulty resource the
// Node reports from now on; stop ends the watch and returns it.
func (cn *clusterNode) maxCapacitySeen(t *testing.T) (stop func() int64) {
	t.Helper()
	w, err := cn.admin.CoreV1().Nodes().Watch(cn.ctx(), metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", cn.hostname()).String()})
	must(t, err)
	var max int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if n, ok := ev.Object.(*v1.Node); ok && ev.Type != watch.Error {
				if c := n.Status.Capacity[faultyResource]; c.Value() > max {
					max = c.Value()
				}
			}
		}
	}()
	return func() int64 { w.Stop(); <-done; return max }
}

// TestDevicePluginFaults runs misbehaving device plugins against a Skiff
// of the test's own: device lists no hardware gives are ignored and the
// plugin kept; an Allocate that fails, hangs or dies with its plugin
// fails the pod's admission as upstream (UnexpectedAdmissionError) with
// the plugin's error or the call's deadline, and the node goes on
// running pods; a second plugin for a resource whose plugin still
// answers is refused; a plugin gone leaves its devices in the Node's
// capacity but not its allocatable (the grace period), and the pods
// holding them running.
func TestDevicePluginFaults(t *testing.T) {
	cn := newPrivateClusterNode(t)
	cn.appendConfig(fastNodeStatus)
	cn.start()
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	dir := cn.devicePluginDir()
	p := startFaultyPlugin(t, dir, "faulty-1.sock", faultyDevices(true, "d1", "d2")...)
	cn.waitExtendedResource(t, faultyResource, 2, 2)

	// Garbage: more devices than hardware has, an ID twice, no ID. Then a
	// valid list (d2 unhealthy) that Skiff must take from the same stream.
	maxSeen := cn.maxCapacitySeen(t)
	many := make([]string, 20000)
	for i := range many {
		many[i] = fmt.Sprintf("x%d", i)
	}
	p.lists <- faultyDevices(true, many...)
	p.lists <- faultyDevices(true, "d1", "d1", "d2")
	p.lists <- faultyDevices(true, "d1", "")
	p.lists <- append(faultyDevices(true, "d1"), faultyDevices(false, "d2")...)
	cn.waitExtendedResource(t, faultyResource, 2, 1)
	if m := maxSeen(); m > 2 {
		t.Errorf("the Node advertised %d devices of a garbage list", m)
	}
	if n := p.watchCount(); n != 1 {
		t.Errorf("the plugin's ListAndWatch was opened %d times, want once: garbage ended the stream", n)
	}
	p.lists <- faultyDevices(true, "d1", "d2")
	cn.waitExtendedResource(t, faultyResource, 2, 2)

	// Allocate fails, then hangs past Skiff's deadline: both pods are
	// refused, and a pod created after them runs.
	p.setAllocate(func(context.Context) (*pluginapi.AllocateResponse, error) {
		return nil, errors.New("device on fire")
	})
	cn.createPod(t, deviceConsumer("alloc-fails", faultyResource, 1))
	if msg := cn.waitRefused(t, "alloc-fails"); !strings.Contains(msg, "device on fire") {
		t.Errorf("a failed Allocate: %q, want the plugin's error", msg)
	}
	p.setAllocate(func(ctx context.Context) (*pluginapi.AllocateResponse, error) {
		<-ctx.Done() // Skiff's deadline, or the plugin's end
		return nil, ctx.Err()
	})
	cn.createPod(t, deviceConsumer("alloc-hangs", faultyResource, 1))
	if msg := cn.waitRefused(t, "alloc-hangs"); !strings.Contains(msg, "DeadlineExceeded") {
		t.Errorf("a hung Allocate: %q, want the call's deadline", msg)
	}
	plain := cn.createPod(t, busyboxPod("after-hang", sleeper))
	cn.waitPod(t, cn.ns, plain.Name, 60*time.Second, "running", isRunning)

	// A working Allocate: the pod holds a device and gets its answer.
	p.setAllocate(nil)
	holder := cn.createPod(t, deviceConsumer("holder", faultyResource, 1))
	cn.waitPod(t, cn.ns, holder.Name, 60*time.Second, "running", isRunning)
	held := cn.faultyDevicesOf(t, holder.Name)
	if len(held) != 1 {
		t.Fatalf("the pod resources API reports %v for the holder, want one device", held)
	}
	cn.containerEnv(t, holder, "FAULTY_DEVICES", held[0])

	// A second plugin for the resource while the first answers: refused,
	// the first keeps it.
	other := serveFaultyPlugin(t, dir, "faulty-2.sock", faultyDevices(true, "e1", "e2", "e3")...)
	if err := other.register(); err == nil || !strings.Contains(err.Error(), "AlreadyExists") {
		t.Errorf("a second plugin's registration: %v, want AlreadyExists", err)
	}
	other.kill()

	// The plugin dies in Allocate: the pod is refused; the Node keeps the
	// devices in its capacity (the grace period) but none allocatable, a
	// pod asking for one is refused, and the holder keeps running.
	p.setAllocate(func(context.Context) (*pluginapi.AllocateResponse, error) {
		go p.kill()
		time.Sleep(time.Second) // the kill cuts this call
		return nil, errors.New("unreachable")
	})
	cn.createPod(t, deviceConsumer("plugin-dies", faultyResource, 1))
	cn.waitRefused(t, "plugin-dies")
	cn.waitExtendedResource(t, faultyResource, 2, 0)
	cn.createPod(t, deviceConsumer("after-death", faultyResource, 1))
	cn.waitRefused(t, "after-death")
	if got := cn.faultyDevicesOf(t, holder.Name); len(got) != 1 || got[0] != held[0] {
		t.Errorf("after its plugin died the holder holds %v, want %v", got, held)
	}
	if h := cn.getPod(t, holder.Name); !isRunning(h) {
		t.Errorf("the holder is no longer running: %s", h.Status.Phase)
	}
}

// faultyDevicesOf are the faulty devices the pod holds, as the pod
// resources API's Get reports them.
func (cn *clusterNode) faultyDevicesOf(t *testing.T, name string) []string {
	t.Helper()
	r, err := cn.podResources(t).Get(cn.ctx(), &podresourcesv1.GetPodResourcesRequest{PodName: name, PodNamespace: cn.ns})
	must(t, err)
	var out []string
	for _, c := range r.PodResources.Containers {
		for _, d := range c.Devices {
			if d.ResourceName == faultyResource {
				out = append(out, d.DeviceIds...)
			}
		}
	}
	return out
}

// containerEnv checks that the pod's running container has the variable
// with that value.
func (cn *clusterNode) containerEnv(t *testing.T, p *v1.Pod, name, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(cn.ctx(), 20*time.Second)
	defer cancel()
	out, stderr, err := cn.runtime().ExecSync(ctx, cn.runningContainer(t, p), []string{"sh", "-c", "echo $" + name}, 10*time.Second)
	if err != nil || strings.TrimSpace(string(out)) != want {
		t.Errorf("the container's %s is %q (%v %s), want %q", name, out, err, stderr, want)
	}
}

// TestDevicePluginGoneAfterGracePeriod: a plugin that dies and does not
// come back loses its resource once upstream's grace period (five
// minutes) is over: the Node's capacity of it goes to zero, and the pod
// resources API no longer reports its devices.
func TestDevicePluginGoneAfterGracePeriod(t *testing.T) {
	quietLong(t)
	cn := newPrivateClusterNode(t)
	cn.appendConfig(fastNodeStatus)
	cn.start()
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	p := startFaultyPlugin(t, cn.devicePluginDir(), "faulty.sock", faultyDevices(true, "d1", "d2")...)
	cn.waitExtendedResource(t, faultyResource, 2, 2)
	p.kill()
	cn.waitExtendedResource(t, faultyResource, 2, 0)
	waitFor(t, 7*time.Minute, "the Node's capacity of the gone plugin's resource at zero", func() (bool, error) {
		n, err := cn.admin.CoreV1().Nodes().Get(cn.ctx(), cn.hostname(), metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		c, ok := n.Status.Capacity[faultyResource]
		return ok && c.IsZero(), nil
	})
	alloc, err := cn.podResources(t).GetAllocatableResources(cn.ctx(), &podresourcesv1.AllocatableResourcesRequest{})
	must(t, err)
	if len(alloc.Devices) != 0 {
		t.Errorf("GetAllocatableResources still reports %v", alloc.Devices)
	}
}
