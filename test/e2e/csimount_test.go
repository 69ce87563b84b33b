//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// csiNode is a private cluster node with the hostpath driver of a name of
// its own, registered through its registrar, and the driver's CSIDriver
// object as the driver's own deployment makes it.
type csiNode struct {
	*clusterNode
	driver, sock, driverLog, dir string
}

// newCSINode starts the node and the driver, and registers the driver if
// asked (else register does, later).
func newCSINode(t *testing.T, registered bool) *csiNode {
	t.Helper()
	cn := newPrivateClusterNode(t)
	cn.start()
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	dir := t.TempDir()
	n := &csiNode{clusterNode: cn, driver: fmt.Sprintf("hostpath-%d.csi.k8s.io", cn.rt.id), dir: dir}
	n.sock, n.driverLog = hostpathDriverOn(t, cn, dir, n.driver)
	// Before the driver stops (cleanups run last-in first-out): the pods'
	// volumes need it to be unpublished.
	t.Cleanup(cn.deleteAllPods)
	csiDriver := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: n.driver}, Spec: storagev1.CSIDriverSpec{
		AttachRequired: ptr.To(false), PodInfoOnMount: ptr.To(true),
		VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral},
	}}
	_, err := cn.admin.StorageV1().CSIDrivers().Create(cn.ctx(), csiDriver, metav1.CreateOptions{})
	must(t, err)
	t.Cleanup(func() {
		_ = cn.admin.StorageV1().CSIDrivers().Delete(context.Background(), n.driver, metav1.DeleteOptions{})
	})
	if registered {
		n.register(t)
	}
	return n
}

// register starts the driver's registrar and waits for the registration.
func (n *csiNode) register(t *testing.T) {
	t.Helper()
	startRegistrar(t, n.clusterNode, csiBinary(t, n.dir, "csi-node-driver-registrar"), filepath.Join(n.dir, "registrar.log"), n.sock)
	waitFor(t, 60*time.Second, "the driver registered", func() (bool, error) {
		_, ok := n.csiNodeDriver(n.driver)
		return ok, nil
	})
}

// createVolume makes a volume through the driver's controller service,
// as external-provisioner would, and returns its handle and context.
func (n *csiNode) createVolume(t *testing.T, name string) *csipb.Volume {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///csi", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", n.sock)
		}))
	must(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := csipb.NewControllerClient(conn).CreateVolume(ctx, &csipb.CreateVolumeRequest{
		Name: name, CapacityRange: &csipb.CapacityRange{RequiredBytes: 1 << 20},
		VolumeCapabilities: []*csipb.VolumeCapability{{
			AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{}},
			AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		}},
	})
	must(t, err)
	return r.GetVolume()
}

// grpcRequests returns the driver's log lines of calls to method with
// their requests.
func (n *csiNode) grpcRequests(t *testing.T, method string) []string {
	t.Helper()
	b, err := os.ReadFile(n.driverLog)
	must(t, err)
	var out []string
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		if !strings.Contains(l, "GRPC call: "+method) {
			continue
		}
		for _, next := range lines[i+1:] { // the call's "GRPC request: {...}"
			if strings.Contains(next, "GRPC request: ") {
				out = append(out, next)
				break
			}
		}
	}
	return out
}

// A CSI PV of the real hostpath driver: staged at upstream's global path,
// published into the pod's directory with the pod's information, its data
// seen by a second pod after the first is gone; unpublished and unstaged
// once no pod uses it, and nothing stays mounted.
func TestCSIPersistentVolumeStagePublish(t *testing.T) {
	n := newCSINode(t, true)
	vol := n.createVolume(t, "vol-"+n.ns)
	n.claimPV(t, "data", v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{
		Driver: n.driver, VolumeHandle: vol.GetVolumeId(), VolumeAttributes: vol.GetVolumeContext()}}, nil)
	n.claim(t, "data")

	writer := n.createPod(t, claimPod("writer", "data", false, "echo kept > /data/f"))
	n.waitPod(t, n.ns, "writer", 60*time.Second, "Succeeded", succeeded)
	staging := filepath.Join(n.root, "plugins/kubernetes.io/csi", n.driver, fmt.Sprintf("%x", sha256.Sum256([]byte(vol.GetVolumeId()))), "globalmount")
	target := filepath.Join(n.root, "pods", string(writer.UID), "volumes/kubernetes.io~csi", n.ns+"-data", "mount")
	stages, publishes := n.grpcRequests(t, "/csi.v1.Node/NodeStageVolume"), n.grpcRequests(t, "/csi.v1.Node/NodePublishVolume")
	if len(stages) != 1 || !strings.Contains(stages[0], staging) {
		t.Errorf("NodeStageVolume calls %v, want one at %s", stages, staging)
	}
	if len(publishes) != 1 || !strings.Contains(publishes[0], target) || !strings.Contains(publishes[0], staging) ||
		!strings.Contains(publishes[0], `"csi.storage.k8s.io/pod.name":"writer"`) ||
		!strings.Contains(publishes[0], `"csi.storage.k8s.io/ephemeral":"false"`) {
		t.Errorf("NodePublishVolume calls %v, want one at %s with the pod's information", publishes, target)
	}
	must(t, n.admin.CoreV1().Pods(n.ns).Delete(n.ctx(), "writer", metav1.DeleteOptions{}))
	waitFor(t, 60*time.Second, "the volume unpublished and unstaged", func() (bool, error) {
		return len(n.grpcRequests(t, "/csi.v1.Node/NodeUnstageVolume")) == 1, nil
	})
	if got := n.grpcRequests(t, "/csi.v1.Node/NodeUnpublishVolume"); len(got) != 1 || !strings.Contains(got[0], target) {
		t.Errorf("NodeUnpublishVolume calls %v", got)
	}

	n.createPod(t, claimPod("reader", "data", true, `test "$(cat /data/f)" = kept`))
	n.waitPod(t, n.ns, "reader", 60*time.Second, "Succeeded", succeeded)
	must(t, n.admin.CoreV1().Pods(n.ns).Delete(n.ctx(), "reader", metav1.DeleteOptions{}))
	waitFor(t, 60*time.Second, "the second pod's volume unstaged", func() (bool, error) {
		return len(n.grpcRequests(t, "/csi.v1.Node/NodeUnstageVolume")) == 2, nil
	})
	if mps := mountsUnder(n.root + "/"); len(mps) != 0 {
		t.Errorf("mounts left under the root directory: %v", mps)
	}
}

// inlinePod writes to an inline volume of the driver, once.
func inlinePod(name, driver string) *v1.Pod {
	p := busyboxPod(name, "echo hi > /scratch/f && test -s /scratch/f")
	p.Spec.RestartPolicy = v1.RestartPolicyNever
	p.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: driver}}}}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	return p
}

// A pod whose CSI driver is not registered waits in ContainerCreating
// with a FailedMount event naming the driver, and starts by itself once
// the driver registers.
func TestCSIDriverRegisteredLate(t *testing.T) {
	n := newCSINode(t, false)
	n.createPod(t, inlinePod("early", n.driver))
	n.waitPodEvent(t, "early", "FailedMount", "driver name "+n.driver+" not found in the list of registered CSI drivers", 60*time.Second)
	n.waitPod(t, n.ns, "early", 10*time.Second, "ContainerCreating", waitingCreating)
	n.register(t)
	n.waitPod(t, n.ns, "early", 60*time.Second, "Succeeded once the driver registered", succeeded)
}

// A CSI inline ephemeral volume: published (never staged) with upstream's
// handle and the ephemeral flag, unpublished with the pod.
func TestCSIInlineEphemeralVolume(t *testing.T) {
	n := newCSINode(t, true)
	pod := n.createPod(t, inlinePod("inline", n.driver))
	n.waitPod(t, n.ns, "inline", 60*time.Second, "Succeeded", succeeded)
	handle := fmt.Sprintf("csi-%x", sha256.Sum256([]byte(string(pod.UID)+"scratch")))
	publishes := n.grpcRequests(t, "/csi.v1.Node/NodePublishVolume")
	if len(publishes) != 1 || !strings.Contains(publishes[0], handle) || !strings.Contains(publishes[0], `"csi.storage.k8s.io/ephemeral":"true"`) {
		t.Errorf("NodePublishVolume calls %v, want one of %s, ephemeral", publishes, handle)
	}
	if got := n.grpcRequests(t, "/csi.v1.Node/NodeStageVolume"); len(got) != 0 {
		t.Errorf("an inline volume was staged: %v", got)
	}
	must(t, n.admin.CoreV1().Pods(n.ns).Delete(n.ctx(), "inline", metav1.DeleteOptions{}))
	waitFor(t, 60*time.Second, "the inline volume unpublished", func() (bool, error) {
		return len(n.grpcRequests(t, "/csi.v1.Node/NodeUnpublishVolume")) == 1, nil
	})
}

// A pod deleted while Skiff is down: the restarted Skiff finds its CSI
// volume from the pod directory's vol_data.json, unpublishes and unstages
// it, and leaves no mount under the root directory.
func TestCSIVolumeOfPodDeletedWhileSkiffDown(t *testing.T) {
	n := newCSINode(t, true)
	vol := n.createVolume(t, "vol-"+n.ns)
	n.claimPV(t, "data", v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{
		Driver: n.driver, VolumeHandle: vol.GetVolumeId(), VolumeAttributes: vol.GetVolumeContext()}}, nil)
	n.claim(t, "data")
	p := claimPod("sleeper", "data", false, sleeper)
	p.Spec.RestartPolicy = v1.RestartPolicyAlways
	n.createPod(t, p)
	n.waitPod(t, n.ns, "sleeper", 60*time.Second, "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	if got := n.grpcRequests(t, "/csi.v1.Node/NodePublishVolume"); len(got) != 1 {
		t.Fatalf("NodePublishVolume calls %v", got)
	}

	n.stop()
	must(t, n.admin.CoreV1().Pods(n.ns).Delete(n.ctx(), "sleeper", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	n.start()
	waitFor(t, 90*time.Second, "the volume unpublished and unstaged by the restarted Skiff", func() (bool, error) {
		return len(n.grpcRequests(t, "/csi.v1.Node/NodeUnstageVolume")) == 1, nil
	})
	if got := n.grpcRequests(t, "/csi.v1.Node/NodeUnpublishVolume"); len(got) != 1 {
		t.Errorf("NodeUnpublishVolume calls %v", got)
	}
	waitFor(t, 30*time.Second, "no mount left under the root directory", func() (bool, error) {
		return len(mountsUnder(n.root+"/")) == 0, nil
	})
}
