//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/skiff-sh/skiff/internal/devicemanager/checkpoint"
)

// sampleResource is what upstream's sample device plugin advertises: two
// healthy devices, Dev-1 and Dev-2. Its Allocate answers a mount of
// /tmp/<device> (a file it makes on the host) at the same path.
const sampleResource = "example.com/resource"

// TestDevicePluginSample runs upstream's sample device plugin
// (k8s.io/kubernetes/test/images/sample-device-plugin, built by
// hack/build-tools.sh) as a DaemonSet on a node of the test's own: it
// registers through the node's registration socket, mounted where it
// looks for it. TestDevicePluginSampleOnUpstreamKubelet runs the same
// steps against the upstream kubelet.
func TestDevicePluginSample(t *testing.T) {
	cn := newPrivateClusterNode(t)
	cn.appendConfig(fastNodeStatus)
	cn.start()
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	devicePluginSample(t, cn, cn.devicePluginDir())
}

// fastNodeStatus makes a node report its device resources promptly.
const fastNodeStatus = "nodeStatusUpdateFrequency: 2s\n"

// devicePluginSample runs the sample plugin on a Ready node whose plugins
// register in dpDir. The Node advertises its devices and the scheduler
// places a pod asking for one there; the pod gets what Allocate
// returned; a pod bound by hand asking for more than are free is refused
// as upstream refuses it; assignments survive a restart of the kubelet
// and of the plugin; the pod resources API reports them. The plugin is
// left running.
func devicePluginSample(t *testing.T, cn *clusterNode, dpDir string) {
	t.Helper()
	plugin := cn.runPluginDaemonSet(t, samplePluginPod(t, dpDir))
	useSampleDeviceFiles(t)
	cn.waitExtendedResource(t, sampleResource, 2, 2)
	pr := cn.podResources(t)

	scheduled := deviceConsumer("consumer", sampleResource, 1)
	scheduled.Spec.NodeName = ""
	scheduled.Spec.NodeSelector = map[string]string{v1.LabelHostname: cn.hostname()}
	tolerateUpstream(&scheduled.Spec)
	consumer := cn.createPod(t, scheduled)
	cn.waitPod(t, cn.ns, consumer.Name, 60*time.Second, "running", isRunning)
	held := cn.devicesOf(t, pr, consumer.Name)
	if len(held) != 1 {
		t.Fatalf("pod resources report %v for the consumer, want one device", held)
	}
	cid := cn.containerSees(t, consumer, "/tmp/"+held[0])

	cn.createPod(t, deviceConsumer("too-many", sampleResource, 3))
	refused := cn.waitPod(t, cn.ns, "too-many", 30*time.Second, "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if refused.Status.Reason != "UnexpectedAdmissionError" || !strings.Contains(refused.Status.Message, "requested number of devices unavailable for "+sampleResource) {
		t.Errorf("a pod asking for 3 devices: %s %q, want UnexpectedAdmissionError for the devices", refused.Status.Reason, refused.Status.Message)
	}
	alloc, err := pr.GetAllocatableResources(cn.ctx(), &podresourcesv1.AllocatableResourcesRequest{})
	must(t, err)
	if got := deviceIDs(alloc.Devices); !slices.Equal(got, []string{"Dev-1", "Dev-2"}) {
		t.Errorf("GetAllocatableResources reports %v, want Dev-1 and Dev-2", got)
	}

	// A restarted kubelet keeps the running pod's device: its container
	// is not restarted, the checkpoint names it, and a pod asking for
	// both devices once the plugin has registered again is refused.
	cn.stop()
	cp, err := checkpoint.Read(dpDir)
	must(t, err)
	if !checkpointHolds(cp, string(consumer.UID), held[0]) {
		t.Errorf("the checkpoint %+v does not give %s to the consumer", cp.Entries, held[0])
	}
	cn.start()
	pr = cn.podResources(t)
	cn.waitAllocatableDevices(t, pr, 2)
	if got := cn.devicesOf(t, pr, consumer.Name); !slices.Equal(got, held) {
		t.Errorf("after the restart the consumer holds %v, want %v", got, held)
	}
	cn.createPod(t, deviceConsumer("both", sampleResource, 2))
	if p := cn.waitPod(t, cn.ns, "both", 30*time.Second, "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed }); p.Status.Reason != "UnexpectedAdmissionError" {
		t.Errorf("after the restart a pod asking for both devices: %s %q, want refused", p.Status.Reason, p.Status.Message)
	}
	other := cn.createPod(t, deviceConsumer("other", sampleResource, 1))
	cn.waitPod(t, cn.ns, other.Name, 60*time.Second, "running", isRunning)
	if got := cn.devicesOf(t, pr, other.Name); len(got) != 1 || got[0] == held[0] {
		t.Errorf("the second consumer got %v, the first holds %v", got, held)
	}

	// The plugin restarts (killed; its pod restarts it on a new socket)
	// and registers again: allocations go to the new one, the consumer
	// keeps its device.
	cn.restartPlugin(t, plugin, dpDir)
	must(t, cn.admin.CoreV1().Pods(cn.ns).Delete(cn.ctx(), other.Name, metav1.DeleteOptions{}))
	waitFor(t, 60*time.Second, "the second consumer deleted", func() (bool, error) {
		_, err := cn.admin.CoreV1().Pods(cn.ns).Get(cn.ctx(), other.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	last := cn.createPod(t, deviceConsumer("last", sampleResource, 1))
	cn.waitPod(t, cn.ns, last.Name, 60*time.Second, "running", isRunning)
	if got := cn.devicesOf(t, pr, last.Name); len(got) != 1 || got[0] == held[0] {
		t.Errorf("after the plugin restart a new consumer got %v, the first holds %v", got, held)
	}
	if got := cn.devicesOf(t, pr, consumer.Name); !slices.Equal(got, held) {
		t.Errorf("after the plugin restart the consumer holds %v, want %v", got, held)
	}
	if id := cn.runningContainer(t, consumer); id != cid {
		t.Errorf("the consumer's container changed from %s to %s", cid, id)
	}
}

// sampleFiles counts the tests whose sample plugins may still make
// /tmp/Dev-1 and /tmp/Dev-2 (its Allocate makes them on the host, the
// same for every node); the last one done removes them, so no test
// removes a file between another's Allocate and its container's start.
var sampleFiles struct {
	sync.Mutex
	users int
}

func useSampleDeviceFiles(t *testing.T) {
	sampleFiles.Lock()
	sampleFiles.users++
	sampleFiles.Unlock()
	t.Cleanup(func() {
		sampleFiles.Lock()
		defer sampleFiles.Unlock()
		if sampleFiles.users--; sampleFiles.users == 0 {
			_ = os.Remove("/tmp/Dev-1")
			_ = os.Remove("/tmp/Dev-2")
		}
	})
}

func isRunning(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodRunning && len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Running != nil
}

// samplePluginPod runs the sample plugin's binary from the host, with the
// node's registration directory where plugins look for it, and the
// host's /tmp, where it makes the files its Allocate mounts.
func samplePluginPod(t *testing.T, dpDir string) *v1.Pod {
	t.Helper()
	bin, err := filepath.Abs("../../_output/bin/sample-device-plugin")
	must(t, err)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the sample device plugin is not built (hack/build-tools.sh): %v", err)
	}
	file, dir := v1.HostPathFile, v1.HostPathDirectory
	p := busyboxPod("sample-device-plugin", "")
	c := &p.Spec.Containers[0]
	c.Command = []string{"/sample-device-plugin"}
	c.Env = []v1.EnvVar{{Name: "PLUGIN_SOCK_DIR", Value: "/var/lib/kubelet/device-plugins"}}
	for _, m := range []struct{ name, host, path string }{
		{"bin", bin, "/sample-device-plugin"},
		{"device-plugins", dpDir, "/var/lib/kubelet/device-plugins"},
		{"tmp", "/tmp", "/tmp"},
	} {
		typ := &dir
		if m.name == "bin" {
			typ = &file
		}
		p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: m.name, VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: m.host, Type: typ}}})
		c.VolumeMounts = append(c.VolumeMounts, v1.VolumeMount{Name: m.name, MountPath: m.path})
	}
	return p
}

// runPluginDaemonSet runs the plugin pod's spec as a DaemonSet on the
// node alone (an upstream node too), and returns its pod once there.
func (cn *clusterNode) runPluginDaemonSet(t *testing.T, p *v1.Pod) *v1.Pod {
	t.Helper()
	labels := map[string]string{"app": "sample-device-plugin", testLabel: "true"}
	p.Spec.NodeName = ""
	p.Spec.NodeSelector = map[string]string{v1.LabelHostname: cn.hostname()}
	tolerateUpstream(&p.Spec)
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "sample-device-plugin"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: p.Spec},
		},
	}
	dss := cn.admin.AppsV1().DaemonSets(cn.ns)
	_, err := dss.Create(cn.ctx(), ds, metav1.CreateOptions{})
	must(t, err)
	// Before the test's pods are deleted (cleanups run last first), or
	// the controller would make its pod again.
	t.Cleanup(func() { _ = dss.Delete(context.Background(), ds.Name, metav1.DeleteOptions{}) })
	var pod *v1.Pod
	waitFor(t, 60*time.Second, "the plugin's DaemonSet pod running on the node", func() (bool, error) {
		list, err := cn.admin.CoreV1().Pods(cn.ns).List(cn.ctx(), metav1.ListOptions{LabelSelector: "app=sample-device-plugin"})
		if err != nil || len(list.Items) != 1 || list.Items[0].Spec.NodeName != cn.hostname() || !isRunning(&list.Items[0]) {
			return false, nil
		}
		pod = &list.Items[0]
		return true, nil
	})
	return pod
}

// deviceConsumer is a sleeping pod asking for n devices of res.
func deviceConsumer(name string, res v1.ResourceName, n int64) *v1.Pod {
	p := busyboxPod(name, sleeper)
	p.Spec.Containers[0].Resources.Limits = v1.ResourceList{res: *resource.NewQuantity(n, resource.DecimalSI)}
	return p
}

// waitExtendedResource waits for the Node's capacity and allocatable of
// the resource.
func (cn *clusterNode) waitExtendedResource(t *testing.T, res v1.ResourceName, capacity, allocatable int64) {
	t.Helper()
	waitFor(t, 60*time.Second, fmt.Sprintf("Node %s: %d/%d", res, capacity, allocatable), func() (bool, error) {
		n, err := cn.admin.CoreV1().Nodes().Get(cn.ctx(), cn.hostname(), metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		c, a := n.Status.Capacity[res], n.Status.Allocatable[res]
		return c.Value() == capacity && a.Value() == allocatable, nil
	})
}

// podResources dials the node's pod resources API.
func (cn *clusterNode) podResources(t *testing.T) podresourcesv1.PodResourcesListerClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+filepath.Join(cn.root, "pod-resources", "kubelet.sock"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	must(t, err)
	t.Cleanup(func() { conn.Close() })
	return podresourcesv1.NewPodResourcesListerClient(conn)
}

// waitAllocatableDevices waits until the pod resources API reports n
// allocatable devices: the plugin has registered with this Skiff.
func (cn *clusterNode) waitAllocatableDevices(t *testing.T, pr podresourcesv1.PodResourcesListerClient, n int) {
	t.Helper()
	waitFor(t, 60*time.Second, fmt.Sprintf("%d allocatable devices", n), func() (bool, error) {
		r, err := pr.GetAllocatableResources(cn.ctx(), &podresourcesv1.AllocatableResourcesRequest{})
		return err == nil && len(r.Devices) == n, nil
	})
}

// devicesOf are the sample's devices the pod's container holds, as List
// reports them (Get must agree).
func (cn *clusterNode) devicesOf(t *testing.T, pr podresourcesv1.PodResourcesListerClient, name string) []string {
	t.Helper()
	list, err := pr.List(cn.ctx(), &podresourcesv1.ListPodResourcesRequest{})
	must(t, err)
	var fromList []string
	for _, p := range list.PodResources {
		if p.Namespace == cn.ns && p.Name == name {
			fromList = containerDeviceIDs(p)
		}
	}
	got, err := pr.Get(cn.ctx(), &podresourcesv1.GetPodResourcesRequest{PodName: name, PodNamespace: cn.ns})
	must(t, err)
	if fromGet := containerDeviceIDs(got.PodResources); !slices.Equal(fromGet, fromList) {
		t.Errorf("pod %s: Get reports %v, List %v", name, fromGet, fromList)
	}
	return fromList
}

func containerDeviceIDs(p *podresourcesv1.PodResources) []string {
	var out []*podresourcesv1.ContainerDevices
	for _, c := range p.Containers {
		out = append(out, c.Devices...)
	}
	return deviceIDs(out)
}

func deviceIDs(devs []*podresourcesv1.ContainerDevices) []string {
	var out []string
	for _, d := range devs {
		if d.ResourceName == sampleResource {
			out = append(out, d.DeviceIds...)
		}
	}
	slices.Sort(out)
	return out
}

func checkpointHolds(cp checkpoint.Checkpoint, uid, device string) bool {
	for _, e := range cp.Entries {
		if e.PodUID == uid && e.ResourceName == sampleResource && slices.Contains(e.DeviceIDs[-1], device) {
			return true
		}
	}
	return false
}

// runningContainer is the ID of the pod's running container.
func (cn *clusterNode) runningContainer(t *testing.T, p *v1.Pod) string {
	t.Helper()
	for _, c := range cn.containersOf(string(p.UID)) {
		if c.State.String() == "CONTAINER_RUNNING" {
			return c.Id
		}
	}
	t.Fatalf("pod %s has no running container", p.Name)
	return ""
}

// containerSees checks that the pod's container has the file at path (the
// mount Allocate returned) and returns the container's ID.
func (cn *clusterNode) containerSees(t *testing.T, p *v1.Pod, path string) string {
	t.Helper()
	id := cn.runningContainer(t, p)
	ctx, cancel := context.WithTimeout(cn.ctx(), 20*time.Second)
	defer cancel()
	if _, stderr, err := cn.runtime().ExecSync(ctx, id, []string{"test", "-f", path}, 10*time.Second); err != nil {
		t.Errorf("the container does not see %s: %v %s", path, err, stderr)
	}
	st, err := cn.runtime().ContainerStatus(ctx, id, false)
	must(t, err)
	found := false
	for _, m := range st.Status.Mounts {
		found = found || (m.ContainerPath == path && m.HostPath == path)
	}
	if !found {
		t.Errorf("the container's mounts %v lack %s from Allocate", st.Status.Mounts, path)
	}
	return id
}

// restartPlugin kills the plugin's process; its pod starts it again, on
// a socket of a new name, and it registers again.
func (cn *clusterNode) restartPlugin(t *testing.T, plugin *v1.Pod, dpDir string) {
	t.Helper()
	before := pluginSockets(t, dpDir)
	cn.killContainerProcess(cn.runningContainer(t, plugin))
	waitFor(t, 60*time.Second, "the plugin restarted on a new socket", func() (bool, error) {
		p, err := cn.admin.CoreV1().Pods(cn.ns).Get(cn.ctx(), plugin.Name, metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].RestartCount == 0 || !isRunning(p) {
			return false, nil
		}
		for _, s := range pluginSockets(t, dpDir) {
			if !slices.Contains(before, s) {
				return true, nil
			}
		}
		return false, nil
	})
}

// pluginSockets are the sockets in the registration directory but
// kubelet.sock.
func pluginSockets(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	must(t, err)
	var out []string
	for _, e := range entries {
		if e.Type()&os.ModeSocket != 0 && e.Name() != "kubelet.sock" {
			out = append(out, e.Name())
		}
	}
	return out
}
