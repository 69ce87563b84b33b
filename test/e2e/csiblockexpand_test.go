//go:build e2e

package e2e

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// boundClaim creates a claim of the storage class and waits until it is
// bound (the provisioner made its volume); it returns the claim.
func boundClaim(t *testing.T, d *csiDriverPods, name, sc string, mode v1.PersistentVolumeMode) *v1.PersistentVolumeClaim {
	t.Helper()
	pvc := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PersistentVolumeClaimSpec{
		AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, StorageClassName: &sc, VolumeMode: &mode,
		Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Mi")}},
	}}
	_, err := d.admin.CoreV1().PersistentVolumeClaims(d.ns).Create(d.ctx(), pvc, metav1.CreateOptions{})
	must(t, err)
	waitFor(t, 60*time.Second, "claim "+name+" bound", func() (bool, error) {
		pvc, err = d.admin.CoreV1().PersistentVolumeClaims(d.ns).Get(d.ctx(), name, metav1.GetOptions{})
		return err == nil && pvc.Status.Phase == v1.ClaimBound, nil
	})
	return pvc
}

// deleteClaim deletes the claim and waits for its PV to go (the
// provisioner deletes the driver's volume).
func deleteClaim(t *testing.T, d *csiDriverPods, pvc *v1.PersistentVolumeClaim) {
	t.Helper()
	must(t, d.admin.CoreV1().PersistentVolumeClaims(d.ns).Delete(d.ctx(), pvc.Name, metav1.DeleteOptions{}))
	waitFor(t, 60*time.Second, "the PV deleted by the provisioner", func() (bool, error) {
		_, err := d.admin.CoreV1().PersistentVolumes().Get(d.ctx(), pvc.Spec.VolumeName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// deletePodAndWait deletes the pod and waits until Skiff has removed its
// directory (its volumes are torn down).
func deletePodAndWait(t *testing.T, cn *clusterNode, p *v1.Pod) {
	t.Helper()
	must(t, cn.admin.CoreV1().Pods(cn.ns).Delete(cn.ctx(), p.Name, metav1.DeleteOptions{}))
	waitFor(t, 60*time.Second, p.Name+" gone with its directory", func() (bool, error) {
		_, err := cn.admin.CoreV1().Pods(cn.ns).Get(cn.ctx(), p.Name, metav1.GetOptions{})
		_, statErr := os.Lstat(filepath.Join(cn.root, "pods", string(p.UID)))
		return apierrors.IsNotFound(err) && os.IsNotExist(statErr), nil
	})
}

// blockPod runs a sleeper with the claim as the device /dev/xvda.
func blockPod(name, claim string) *v1.Pod {
	p := busyboxPod(name, sleeper)
	p.Spec.Volumes = []v1.Volume{{Name: "raw", VolumeSource: v1.VolumeSource{
		PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
	p.Spec.Containers[0].VolumeDevices = []v1.VolumeDevice{{Name: "raw", DevicePath: "/dev/xvda"}}
	return p
}

// driverFilesHolding lists the driver's files on the host that start
// with data.
func driverFilesHolding(t *testing.T, dir string, data []byte) []string {
	t.Helper()
	var out []string
	must(t, filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		if b, err := os.ReadFile(p); err == nil && bytes.HasPrefix(b, data) {
			out = append(out, p)
		}
		return nil
	}))
	return out
}

// A Block claim of the real hostpath driver reaches the container as a
// device: staged and published at upstream's volumeDevices paths, the
// publish target (a block device on the host) is the container's
// /dev/xvda, and what dd writes there lands on the driver's storage and
// is read by the next pod of the claim. The first pod's volume is
// unpublished and unstaged once it is gone, and nothing of the volume or
// its pods is left mounted.
func TestCSIRawBlockVolumeAsDevice(t *testing.T) {
	cn := newPrivateClusterNode(t)
	cn.start()
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	d := deployCSIDriver(t, cn)
	pvc := boundClaim(t, d, "raw", d.storageClass(t), v1.PersistentVolumeBlock)
	pv := pvc.Spec.VolumeName
	devices := filepath.Join(cn.root, "plugins/kubernetes.io/csi/volumeDevices")

	first := cn.createPod(t, blockPod("raw-1", "raw"))
	first = cn.waitPod(t, cn.ns, first.Name, 90*time.Second, "running", isReady)
	publish := filepath.Join(devices, "publish", pv, string(first.UID))
	var st unix.Stat_t
	must(t, unix.Lstat(publish, &st))
	if st.Mode&unix.S_IFMT != unix.S_IFBLK {
		t.Fatalf("the publish target %s is not a block device: mode %#o", publish, st.Mode)
	}
	// The container's device is the one the driver published.
	inside := strings.TrimSpace(execWeb(t, cn, first, "stat", "-c", "%t:%T:%F", "/dev/xvda"))
	if want := fmt.Sprintf("%x:%x:block special file", unix.Major(st.Rdev), unix.Minor(st.Rdev)); inside != want {
		t.Errorf("/dev/xvda in the container: %q, want %q", inside, want)
	}
	if got, err := os.Readlink(filepath.Join(cn.root, "pods", string(first.UID), "volumeDevices/kubernetes.io~csi", pv)); err != nil || got != publish {
		t.Errorf("the pod's device symlink: %s, %v", got, err)
	}
	calls := &csiNode{driverLog: d.driverLog()}
	staging := filepath.Join(devices, "staging", pv)
	for method, want := range map[string]string{"NodeStageVolume": `"staging_target_path":"` + staging + `"`,
		"NodePublishVolume": `"target_path":"` + publish + `"`} {
		reqs := strings.Join(calls.grpcRequests(t, "/csi.v1.Node/"+method), "\n")
		if !strings.Contains(reqs, want) || !strings.Contains(reqs, `"block":{}`) {
			t.Errorf("no %s of a block volume with %s among:\n%s", method, want, reqs)
		}
	}

	token := "raw-" + cn.ns
	execWeb(t, cn, first, "sh", "-c", "printf %s "+token+" | dd of=/dev/xvda conv=notrunc,fsync 2>/dev/null")
	if got := driverFilesHolding(t, d.dataDir, []byte(token)); len(got) != 1 {
		t.Errorf("files of the driver's storage starting with the data: %v, want one", got)
	}
	deletePodAndWait(t, cn, first)
	if _, err := os.Lstat(publish); !os.IsNotExist(err) {
		t.Errorf("the deleted pod's publish target is left: %v", err)
	}
	for method, path := range map[string]string{"NodeUnpublishVolume": publish, "NodeUnstageVolume": staging} {
		if reqs := strings.Join(calls.grpcRequests(t, "/csi.v1.Node/"+method), "\n"); !strings.Contains(reqs, `"`+path+`"`) {
			t.Errorf("no %s of %s among:\n%s", method, path, reqs)
		}
	}

	second := cn.createPod(t, blockPod("raw-2", "raw"))
	second = cn.waitPod(t, cn.ns, second.Name, 90*time.Second, "running", isReady)
	n := strconv.Itoa(len(token))
	if got := execWeb(t, cn, second, "dd", "if=/dev/xvda", "bs="+n, "count=1"); got != token {
		t.Errorf("the next pod reads %q from its device, want %q", got, token)
	}
	deletePodAndWait(t, cn, second)
	deleteClaim(t, d, pvc)
	if left, _ := os.ReadDir(filepath.Join(devices, "publish")); len(left) != 0 {
		t.Errorf("left in %s: %v", filepath.Join(devices, "publish"), left)
	}
	// (The driver pod runs on, with its own mounts.)
	if mps := mountsUnder(devices+"/", filepath.Join(cn.root, "pods", string(first.UID))+"/",
		filepath.Join(cn.root, "pods", string(second.UID))+"/"); len(mps) != 0 {
		t.Errorf("mounts left of the block volume or its pods: %v", mps)
	}
}

// A mounted Filesystem claim of the real hostpath driver grown with a
// patch: external-resizer grows the volume and leaves the claim to the
// node; Skiff calls NodeExpandVolume with the pod's publish target and
// the staging path, and the claim's status gets the new capacity, loses
// its resize status and conditions; the pod and the claim get
// FileSystemResizeSuccessful, and the container runs on. (The hostpath
// driver's volumes are directories: df in the pod shows the host's
// filesystem, whatever the claim's size.)
func TestCSIVolumeExpansionOfAMountedClaim(t *testing.T) {
	cn := newPrivateClusterNode(t)
	// A running pod's claims are checked on its syncs: a short
	// syncFrequency keeps the test short.
	f, err := os.OpenFile(cn.config, os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = fmt.Fprintf(f, "syncFrequency: 5s\n")
	must(t, err)
	must(t, f.Close())
	cn.start()
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	d := deployCSIDriver(t, cn, withResizer)
	pvc := boundClaim(t, d, "grow", d.storageClass(t), v1.PersistentVolumeFilesystem)
	p := busyboxPod("grow", sleeper)
	p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{
		PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}}}}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	p = cn.createPod(t, p)
	running := cn.waitPod(t, cn.ns, p.Name, 90*time.Second, "running", isReady)

	patch := []byte(`{"spec":{"resources":{"requests":{"storage":"2Mi"}}}}`)
	_, err = cn.admin.CoreV1().PersistentVolumeClaims(cn.ns).Patch(cn.ctx(), pvc.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	must(t, err)
	want := resource.MustParse("2Mi")
	waitFor(t, 90*time.Second, "the claim's status at 2Mi with no resize left", func() (bool, error) {
		got, err := cn.admin.CoreV1().PersistentVolumeClaims(cn.ns).Get(cn.ctx(), pvc.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		c := got.Status.Capacity[v1.ResourceStorage]
		return c.Cmp(want) == 0 && got.Status.AllocatedResourceStatuses == nil && len(got.Status.Conditions) == 0, nil
	})
	reqs := strings.Join((&csiNode{driverLog: d.driverLog()}).grpcRequests(t, "/csi.v1.Node/NodeExpandVolume"), "\n")
	staging := d.stagingPath(pvc)
	for _, w := range []string{`"volume_path":"` + csiTarget(cn, running, pvc.Spec.VolumeName) + `"`,
		`"staging_target_path":"` + staging + `"`, `"required_bytes":2097152`} {
		if !strings.Contains(reqs, w) {
			t.Errorf("no NodeExpandVolume with %s among:\n%s", w, reqs)
		}
	}
	cn.waitPodEvent(t, p.Name, "FileSystemResizeSuccessful", "MountVolume.NodeExpandVolume succeeded", 30*time.Second)
	after := cn.getPod(t, p.Name)
	if mainStatus(after).ContainerID != mainStatus(running).ContainerID || mainStatus(after).RestartCount != 0 {
		t.Errorf("the container did not run on: %+v", mainStatus(after))
	}
	deletePodAndWait(t, cn, after)
	deleteClaim(t, d, pvc)
}

// stagingPath is where Skiff stages the claim's CSI volume (upstream's
// global mount path of the volume handle).
func (d *csiDriverPods) stagingPath(pvc *v1.PersistentVolumeClaim) string {
	pv, err := d.admin.CoreV1().PersistentVolumes().Get(d.ctx(), pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil || pv.Spec.CSI == nil {
		return fmt.Sprintf("(PV %s: %v)", pvc.Spec.VolumeName, err)
	}
	return filepath.Join(d.root, "plugins/kubernetes.io/csi", d.driver, fmt.Sprintf("%x", sha256.Sum256([]byte(pv.Spec.CSI.VolumeHandle))), "globalmount")
}
