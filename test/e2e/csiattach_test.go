//go:build e2e

package e2e

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The hostpath driver deployed with external-attacher and a CSIDriver
// that says attachRequired, as a driver of network disks is: the
// attach/detach controller creates the VolumeAttachment, the attacher
// calls ControllerPublishVolume, and Skiff stages the volume only once
// it is attached.

// firstCall is the line number of the first gRPC call of method on the
// volume in the driver's log (its "GRPC request" line, after the call's,
// names the volume), 0 when there is none.
func firstCall(t *testing.T, driverLog, method, volumeID string) int {
	t.Helper()
	b, err := os.ReadFile(driverLog)
	must(t, err)
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		if !strings.Contains(l, "GRPC call: "+method) {
			continue
		}
		for _, next := range lines[i+1:] {
			if strings.Contains(next, "GRPC request: ") {
				if strings.Contains(next, volumeID) {
					return i + 1
				}
				break
			}
		}
	}
	return 0
}

// nodeVolumes returns the Node's volumesInUse and the names in its
// volumesAttached.
func (cn *clusterNode) nodeVolumes(t *testing.T) (inUse, attached []v1.UniqueVolumeName) {
	t.Helper()
	n, err := cn.admin.CoreV1().Nodes().Get(cn.ctx(), cn.hostname(), metav1.GetOptions{})
	must(t, err)
	for _, a := range n.Status.VolumesAttached {
		attached = append(attached, a.Name)
	}
	return n.Status.VolumesInUse, attached
}

// A claim of a driver that needs attachment: the Node (annotated for
// controller-managed attach/detach) reports the volume in use, the
// attach/detach controller creates the VolumeAttachment of upstream's
// name and external-attacher attaches it (ControllerPublishVolume)
// before Skiff stages it, and the pod runs. After the pod's deletion the
// volume is unstaged, leaves volumesInUse, and the controller detaches
// it: the VolumeAttachment goes. (The test's and the driver's names are
// short: the driver's socket path, under the test's temporary
// directory, must fit in 108 bytes.)
func TestCSIAttachBeforeStage(t *testing.T) {
	cn := newPrivateClusterNode(t)
	cn.start()
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	node, err := cn.admin.CoreV1().Nodes().Get(cn.ctx(), cn.hostname(), metav1.GetOptions{})
	must(t, err)
	if got := node.Annotations["volumes.kubernetes.io/controller-managed-attach-detach"]; got != "true" {
		t.Errorf("controller-managed-attach-detach annotation %q, want true", got)
	}
	d := deployCSIDriver(t, cn, withAttacher)
	sc := d.storageClass(t)
	pvc := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "disk"}, Spec: v1.PersistentVolumeClaimSpec{
		AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, StorageClassName: &sc,
		Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Mi")}}}}
	_, err = cn.admin.CoreV1().PersistentVolumeClaims(cn.ns).Create(cn.ctx(), pvc, metav1.CreateOptions{})
	must(t, err)
	var pv *v1.PersistentVolume
	waitFor(t, 60*time.Second, "the claim bound to a provisioned PV", func() (bool, error) {
		c, err := cn.admin.CoreV1().PersistentVolumeClaims(cn.ns).Get(cn.ctx(), "disk", metav1.GetOptions{})
		if err != nil || c.Spec.VolumeName == "" {
			return false, nil
		}
		pv, err = cn.admin.CoreV1().PersistentVolumes().Get(cn.ctx(), c.Spec.VolumeName, metav1.GetOptions{})
		return err == nil, nil
	})
	handle := pv.Spec.CSI.VolumeHandle
	unique := v1.UniqueVolumeName("kubernetes.io/csi/" + d.driver + "^" + handle)
	vaName := fmt.Sprintf("csi-%x", sha256.Sum256([]byte(handle+d.driver+cn.hostname())))

	app := busyboxPod("app", sleeper)
	app.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "disk", MountPath: "/data"}}
	app.Spec.Volumes = []v1.Volume{{Name: "disk", VolumeSource: v1.VolumeSource{
		PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "disk"}}}}
	app = cn.createPod(t, app)
	cn.waitPod(t, cn.ns, "app", 90*time.Second, "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning && isReady(p) })

	va, err := cn.admin.StorageV1().VolumeAttachments().Get(cn.ctx(), vaName, metav1.GetOptions{})
	must(t, err)
	if !va.Status.Attached || va.Spec.NodeName != cn.hostname() || va.Spec.Attacher != d.driver {
		t.Errorf("VolumeAttachment %s: attacher %s, node %s, status %+v", vaName, va.Spec.Attacher, va.Spec.NodeName, va.Status)
	}
	if inUse, attached := cn.nodeVolumes(t); !slices.Contains(inUse, unique) || !slices.Contains(attached, unique) {
		t.Errorf("while the pod runs: volumesInUse %v, volumesAttached %v, want both to hold %s", inUse, attached, unique)
	}
	publish := firstCall(t, d.driverLog(), "/csi.v1.Controller/ControllerPublishVolume", handle)
	stage := firstCall(t, d.driverLog(), "/csi.v1.Node/NodeStageVolume", handle)
	if publish == 0 || stage == 0 || publish > stage {
		t.Errorf("ControllerPublishVolume at line %d, NodeStageVolume at line %d of the driver's log: want the attach first", publish, stage)
	}

	must(t, cn.admin.CoreV1().Pods(cn.ns).Delete(cn.ctx(), "app", metav1.DeleteOptions{}))
	waitFor(t, 60*time.Second, "the pod gone with its volume, and the volume out of volumesInUse", func() (bool, error) {
		_, statErr := os.Stat(filepath.Join(cn.root, "pods", string(app.UID)))
		inUse, _ := cn.nodeVolumes(t)
		return os.IsNotExist(statErr) && !slices.Contains(inUse, unique), nil
	})
	if firstCall(t, d.driverLog(), "/csi.v1.Node/NodeUnstageVolume", handle) == 0 {
		t.Errorf("the volume was not unstaged")
	}
	waitFor(t, 90*time.Second, "the controller detached the volume", func() (bool, error) {
		_, err := cn.admin.StorageV1().VolumeAttachments().Get(cn.ctx(), vaName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if firstCall(t, d.driverLog(), "/csi.v1.Controller/ControllerUnpublishVolume", handle) == 0 {
		t.Errorf("no ControllerUnpublishVolume of the volume")
	}

	// The provisioner, in the driver pod, deletes the PV: the pod goes
	// after it.
	must(t, cn.admin.CoreV1().PersistentVolumeClaims(cn.ns).Delete(cn.ctx(), "disk", metav1.DeleteOptions{}))
	waitFor(t, 60*time.Second, "the PV deleted by the provisioner", func() (bool, error) {
		_, err := cn.admin.CoreV1().PersistentVolumes().Get(cn.ctx(), pv.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	must(t, cn.admin.CoreV1().Pods(cn.ns).Delete(cn.ctx(), d.pod.Name, metav1.DeleteOptions{}))
	waitFor(t, 60*time.Second, "the driver pod gone with its directory", func() (bool, error) {
		_, err := cn.admin.CoreV1().Pods(cn.ns).Get(cn.ctx(), d.pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err) && cn.podDirsGone(nil), nil
	})
	if mps := mountsUnder(cn.root + "/"); len(mps) != 0 {
		t.Errorf("mounts left under the root directory: %v", mps)
	}
}
