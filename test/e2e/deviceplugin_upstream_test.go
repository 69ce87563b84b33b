//go:build e2e

package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// TestDevicePluginSampleOnUpstreamKubelet runs TestDevicePluginSample's
// steps against the upstream kubelet v1.34, whose plugins register in its
// fixed directory whatever its root. Then the same pods on it and on a
// Skiff of the test's own, each with the sample plugin, must get the same
// answers from the pod resources API's List, Get and
// GetAllocatableResources (comparePodResources).
func TestDevicePluginSampleOnUpstreamKubelet(t *testing.T) {
	sk := newPrivateClusterNode(t)
	sk.appendConfig(fastNodeStatus)
	up := startUpstreamNode(t, getCluster(t), fastNodeStatus)
	sk.start()

	devicePluginSample(t, up, filepath.Clean(pluginapi.DevicePluginPath))
	up.deletePodsNamed(t, "consumer", "last", "too-many", "both")

	sk.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	sk.runPluginDaemonSet(t, samplePluginPod(t, sk.devicePluginDir()))
	useSampleDeviceFiles(t)
	comparePodResources(t, sk, up)
}

// comparePodResources creates the same pods on Skiff's node and on the
// upstream kubelet's, one at a time so that both choose devices in the
// same state, and compares what their pod resources APIs answer, with
// the namespaces and the DaemonSet pod's generated name left out, and
// the device IDs named by where they first appear (nameDevices). Both
// nodes run the sample plugin's two devices, free. Neither node has a
// static CPU or memory manager (upstream's default policies are none;
// Skiff has neither), so CPU IDs and memory are empty on both, and are
// compared as such.
func comparePodResources(t *testing.T, sk, up *clusterNode) {
	t.Helper()
	nodes := []*clusterNode{sk, up}
	for _, cn := range nodes {
		cn.waitExtendedResource(t, sampleResource, 2, 2)
		for _, p := range podResourcesPods() {
			want, cond := "running", isRunning
			if p.Name == "refused" {
				want, cond = "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed }
			}
			cn.createPod(t, p)
			got := cn.waitPod(t, cn.ns, p.Name, 60*time.Second, want, cond)
			if p.Name == "refused" && got.Status.Reason != "UnexpectedAdmissionError" {
				t.Errorf("node %s: pod refused: %s %q, want UnexpectedAdmissionError", cn.hostname(), got.Status.Reason, got.Status.Message)
			}
		}
	}
	var lists, allocs []proto.Message
	var names []map[string]string
	for _, cn := range nodes {
		pr := cn.podResources(t)
		list, err := pr.List(cn.ctx(), &podresourcesv1.ListPodResourcesRequest{})
		must(t, err)
		l := normalizeList(list, cn.ns)
		names = append(names, nameDevices(l))
		lists = append(lists, l)
		alloc, err := pr.GetAllocatableResources(cn.ctx(), &podresourcesv1.AllocatableResourcesRequest{})
		must(t, err)
		sortDevices(alloc.Devices)
		allocs = append(allocs, alloc)
	}
	// Not two empty answers: Skiff's lists the pods with their devices.
	if got, want := devicesByContainer(lists[0].(*podresourcesv1.ListPodResourcesResponse)), []string{
		"init-dev/main: 1", "plain/main: 0", "plain/second: 0", "sample-device-plugin/main: 0",
		"sidecar-dev/sidecar: 1", "sidecar-dev/main: 0",
	}; !slices.Equal(got, want) {
		t.Errorf("Skiff's List: %v, want %v", got, want)
	}
	sameAnswer(t, "List", lists[0], lists[1])
	if got := deviceIDs(allocs[0].(*podresourcesv1.AllocatableResourcesResponse).Devices); !slices.Equal(got, []string{"Dev-1", "Dev-2"}) {
		t.Errorf("Skiff's GetAllocatableResources: %v, want Dev-1 and Dev-2", got)
	}
	sameAnswer(t, "GetAllocatableResources", allocs[0], allocs[1])
	// The refused pod too: Get reports any pod the kubelet knows, List
	// only the active ones.
	for _, name := range []string{"sidecar-dev", "init-dev", "plain", "refused", "unknown"} {
		var got []string
		for i, cn := range nodes {
			got = append(got, getAnswer(t, cn, name, names[i]))
		}
		if got[0] != got[1] {
			t.Errorf("Get %s: Skiff answers\n%s\nthe upstream kubelet\n%s", name, got[0], got[1])
		}
	}
}

// devicesByContainer is "pod/container: number of devices" for each
// container listed, in order.
func devicesByContainer(l *podresourcesv1.ListPodResourcesResponse) []string {
	var out []string
	for _, p := range l.PodResources {
		for _, c := range p.Containers {
			n := 0
			for _, d := range c.Devices {
				n += len(d.DeviceIds)
			}
			out = append(out, fmt.Sprintf("%s/%s: %d", p.Name, c.Name, n))
		}
	}
	return out
}

// podResourcesPods are the pods comparePodResources creates, in order:
// a sidecar holding a device, an init container's device reused by the
// app container, a pod of two containers with none, and a pod asking for
// a device when none is free.
func podResourcesPods() []*v1.Pod {
	one := v1.ResourceList{sampleResource: *resource.NewQuantity(1, resource.DecimalSI)}
	always := v1.ContainerRestartPolicyAlways

	sidecar := busyboxPod("sidecar-dev", sleeper)
	sidecar.Spec.InitContainers = []v1.Container{sidecar.Spec.Containers[0]}
	sidecar.Spec.InitContainers[0].Name = "sidecar"
	sidecar.Spec.InitContainers[0].RestartPolicy = &always
	sidecar.Spec.InitContainers[0].Resources.Limits = one

	initDev := deviceConsumer("init-dev", sampleResource, 1)
	initDev.Spec.InitContainers = []v1.Container{initDev.Spec.Containers[0]}
	initDev.Spec.InitContainers[0].Name = "init"
	initDev.Spec.InitContainers[0].Command = []string{"true"}

	plain := busyboxPod("plain", sleeper)
	second := plain.Spec.Containers[0]
	second.Name = "second"
	plain.Spec.Containers = append(plain.Spec.Containers, second)

	return []*v1.Pod{sidecar, initDev, plain, deviceConsumer("refused", sampleResource, 1)}
}

// normalizeList keeps the pods of namespace ns, sorted by name, with the
// namespace and the DaemonSet pod's generated suffix left out.
func normalizeList(l *podresourcesv1.ListPodResourcesResponse, ns string) *podresourcesv1.ListPodResourcesResponse {
	out := &podresourcesv1.ListPodResourcesResponse{}
	for _, p := range l.PodResources {
		if p.Namespace != ns {
			continue
		}
		p.Namespace = ""
		if strings.HasPrefix(p.Name, "sample-device-plugin-") {
			p.Name = "sample-device-plugin"
		}
		for _, c := range p.Containers {
			sortDevices(c.Devices)
		}
		out.PodResources = append(out.PodResources, p)
	}
	slices.SortFunc(out.PodResources, func(a, b *podresourcesv1.PodResources) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// sortDevices orders devices by resource and IDs: upstream reports them
// in its maps' order.
func sortDevices(devs []*podresourcesv1.ContainerDevices) {
	slices.SortFunc(devs, func(a, b *podresourcesv1.ContainerDevices) int {
		return strings.Compare(a.ResourceName+"/"+strings.Join(a.DeviceIds, ","), b.ResourceName+"/"+strings.Join(b.DeviceIds, ","))
	})
}

// nameDevices renames the devices the list reports dev-A, dev-B, ... in
// the order they first appear, and returns the names: upstream picks
// free devices in its maps' order, Skiff in the IDs' order, and the
// plugin API asks for neither. Which pods share a device still shows.
func nameDevices(l *podresourcesv1.ListPodResourcesResponse) map[string]string {
	names := map[string]string{}
	for _, p := range l.PodResources {
		for _, c := range p.Containers {
			for _, d := range c.Devices {
				for i, id := range d.DeviceIds {
					if names[id] == "" {
						names[id] = fmt.Sprintf("dev-%c", 'A'+len(names))
					}
					d.DeviceIds[i] = names[id]
				}
			}
		}
	}
	return names
}

// getAnswer is Get's answer for the pod of that name in the node's
// namespace, the namespace left out and the devices renamed as List's:
// the response or the error's code and message.
func getAnswer(t *testing.T, cn *clusterNode, name string, devNames map[string]string) string {
	t.Helper()
	r, err := cn.podResources(t).Get(cn.ctx(), &podresourcesv1.GetPodResourcesRequest{PodName: name, PodNamespace: cn.ns})
	if err != nil {
		s := status.Convert(err)
		return fmt.Sprintf("error %s: %s", s.Code(), strings.ReplaceAll(s.Message(), cn.ns, "<ns>"))
	}
	r.PodResources.Namespace = ""
	for _, c := range r.PodResources.Containers {
		for _, d := range c.Devices {
			for i, id := range d.DeviceIds {
				d.DeviceIds[i] = devNames[id]
			}
		}
		sortDevices(c.Devices)
	}
	return prototext.Format(r)
}

func sameAnswer(t *testing.T, call string, skiff, upstream proto.Message) {
	t.Helper()
	if !proto.Equal(skiff, upstream) {
		t.Errorf("%s: Skiff answers\n%s\nthe upstream kubelet\n%s", call, prototext.Format(skiff), prototext.Format(upstream))
	}
}

// deletePodsNamed deletes the test's pods of these names and waits until
// they are gone from the apiserver.
func (cn *clusterNode) deletePodsNamed(t *testing.T, names ...string) {
	t.Helper()
	pods := cn.admin.CoreV1().Pods(cn.ns)
	for _, name := range names {
		if err := pods.Delete(cn.ctx(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("delete pod %s: %v", name, err)
		}
	}
	waitFor(t, 60*time.Second, fmt.Sprintf("pods %v deleted", names), func() (bool, error) {
		for _, name := range names {
			if _, err := pods.Get(cn.ctx(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, nil
			}
		}
		return true, nil
	})
}
