//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// statefulSet is a StatefulSet of one sleeping pod on the node with a
// claim of the storage class at /data.
func statefulSet(cn *clusterNode, storageClass string) *appsv1.StatefulSet {
	pod := busyboxPod("", sleeper)
	pod.Spec.NodeName = ""
	pod.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": cn.hostname()}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	labels := map[string]string{"app": "web", testLabel: "true"}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](1), ServiceName: "web",
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod.Spec},
			VolumeClaimTemplates: []v1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: v1.PersistentVolumeClaimSpec{
					AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, StorageClassName: &storageClass,
					Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Mi")}},
				}}},
		},
	}
}

// waitWeb waits for web-0 running (not the pod of UID old) and returns it.
func waitWeb(t *testing.T, cn *clusterNode, old types.UID) *v1.Pod {
	t.Helper()
	return cn.waitPod(t, cn.ns, "web-0", 90*time.Second, "web-0 running", func(p *v1.Pod) bool {
		return p.UID != old && p.Status.Phase == v1.PodRunning && isReady(p)
	})
}

// execWeb runs cmd in web-0's container through the node's runtime.
func execWeb(t *testing.T, cn *clusterNode, p *v1.Pod, cmd ...string) string {
	t.Helper()
	id := strings.TrimPrefix(mainStatus(p).ContainerID, "containerd://")
	stdout, stderr, err := cn.rt.rs.ExecSync(context.Background(), id, cmd, 10*time.Second)
	if err != nil {
		t.Fatalf("exec %v in %s: %v: %s", cmd, p.Name, err, stderr)
	}
	return string(stdout)
}

// csiTarget is where Skiff has the driver publish a pod's CSI PV.
func csiTarget(cn *clusterNode, p *v1.Pod, pv string) string {
	return filepath.Join(cn.root, "pods", string(p.UID), "volumes/kubernetes.io~csi", pv, "mount")
}

// The hostpath driver, its registrar and external-provisioner run as a
// pod on a Skiff node (the driver's mounts reach the host through its
// Bidirectional volume mounts of the node's root directory, a shared
// mount). A StatefulSet's claim is provisioned, staged and published;
// its data, written in the pod, is kept on the driver's storage, read by
// the pod that replaces a deleted one, and still read by the pod after a
// Skiff restart. A generic ephemeral volume of the driver's storage
// class lives and goes with its pod. Once the StatefulSet, its claim and
// the driver pod are gone, nothing stays mounted under the root directory.
func TestCSIDriverPodsServeAStatefulSet(t *testing.T) {
	cn := newPrivateClusterNode(t)
	cn.start()
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	csiDriverPodsServeAStatefulSet(t, cn)
}

// csiDriverPodsServeAStatefulSet is TestCSIDriverPodsServeAStatefulSet's
// body on a running node, Skiff's or the upstream kubelet's: the node's
// kubelet is the one restarted.
func csiDriverPodsServeAStatefulSet(t *testing.T, cn *clusterNode) {
	t.Helper()
	d := deployCSIDriver(t, cn)
	sc := d.storageClass(t)
	set := statefulSet(cn, sc)
	if cn.upstream {
		tolerateUpstream(&set.Spec.Template.Spec)
	}
	_, err := cn.admin.AppsV1().StatefulSets(cn.ns).Create(cn.ctx(), set, metav1.CreateOptions{})
	must(t, err)

	first := waitWeb(t, cn, "")
	pvc, err := cn.admin.CoreV1().PersistentVolumeClaims(cn.ns).Get(cn.ctx(), "data-web-0", metav1.GetOptions{})
	must(t, err)
	pv := pvc.Spec.VolumeName
	if !isMountPoint(csiTarget(cn, first, pv)) {
		t.Fatalf("the driver's publish of %s did not reach the host's mount table", csiTarget(cn, first, pv))
	}
	token := "kept-" + cn.ns
	execWeb(t, cn, first, "sh", "-c", "echo "+token+" > /data/f")
	if got := filesHolding(t, d.dataDir, token); len(got) != 1 {
		t.Errorf("files of the driver's storage holding the data: %v, want one", got)
	}

	// The pod deleted: the StatefulSet's next web-0 reads the data.
	must(t, cn.admin.CoreV1().Pods(cn.ns).Delete(cn.ctx(), "web-0", metav1.DeleteOptions{}))
	second := waitWeb(t, cn, first.UID)
	if got := strings.TrimSpace(execWeb(t, cn, second, "cat", "/data/f")); got != token {
		t.Errorf("the new pod reads %q, want %q", got, token)
	}
	if isMountPoint(csiTarget(cn, first, pv)) {
		t.Errorf("the deleted pod's volume is still mounted at %s", csiTarget(cn, first, pv))
	}

	// The kubelet restarted: the pod runs on, its volume published, and
	// reads the data once the new kubelet has registered the driver again.
	infos := countCalls(t, d.driverLog(), "/csi.v1.Node/NodeGetInfo")
	cn.stop()
	cn.start()
	waitFor(t, 60*time.Second, "the driver registered with the restarted kubelet", func() (bool, error) {
		return countCalls(t, d.driverLog(), "/csi.v1.Node/NodeGetInfo") > infos, nil
	})
	after := waitWeb(t, cn, "")
	if after.UID != second.UID || mainStatus(after).ContainerID != mainStatus(second).ContainerID || mainStatus(after).RestartCount != 0 {
		t.Errorf("the pod did not run on across the restart: %s %+v", after.UID, mainStatus(after))
	}
	if got := strings.TrimSpace(execWeb(t, cn, after, "cat", "/data/f")); got != token {
		t.Errorf("after the restart the pod reads %q, want %q", got, token)
	}
	if !isMountPoint(csiTarget(cn, after, pv)) {
		t.Errorf("the volume is no longer mounted at %s after the restart", csiTarget(cn, after, pv))
	}

	genericEphemeralThroughDriver(t, d, sc)
	tearDownStatefulSet(t, d, pv)
}

// genericEphemeralThroughDriver runs a pod with a generic ephemeral
// volume of the driver's storage class: the claim the ephemeral volume
// controller makes for the pod is provisioned by the driver, published
// for the pod and takes its write; once the pod has ended its volume is
// unpublished, the pod object still there; once the pod is deleted, the claim
// (the pod owns it) and the provisioned volume go with its data.
func genericEphemeralThroughDriver(t *testing.T, d *csiDriverPods, storageClass string) {
	t.Helper()
	cn := d.clusterNode
	token := "scratch-" + cn.ns
	p := busyboxPod("scratch", "echo "+token+" > /scratch/f")
	p.Spec.RestartPolicy = v1.RestartPolicyNever
	p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{
		VolumeClaimTemplate: &v1.PersistentVolumeClaimTemplate{Spec: v1.PersistentVolumeClaimSpec{
			AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, StorageClassName: &storageClass,
			Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Mi")}},
		}}}}}}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/scratch"}}
	pod := cn.createPod(t, p)
	cn.waitPod(t, cn.ns, "scratch", 90*time.Second, "Succeeded", succeeded)
	pvc, err := cn.admin.CoreV1().PersistentVolumeClaims(cn.ns).Get(cn.ctx(), "scratch-data", metav1.GetOptions{})
	must(t, err)
	if !metav1.IsControlledBy(pvc, pod) || pvc.Spec.VolumeName == "" {
		t.Fatalf("the ephemeral claim is not the pod's, or not bound: %v %q", pvc.OwnerReferences, pvc.Spec.VolumeName)
	}
	if got := filesHolding(t, d.dataDir, token); len(got) != 1 {
		t.Errorf("files of the driver's storage holding the pod's write: %v, want one", got)
	}
	// The ended pod gives its volume back while the pod object stays.
	target := csiTarget(cn, pod, pvc.Spec.VolumeName)
	// Unpublished, then its directory removed: both are waited for.
	waitFor(t, 60*time.Second, "the ended pod's volume unpublished and its directory removed", func() (bool, error) {
		_, err := os.Stat(filepath.Dir(target))
		return !isMountPoint(target) && os.IsNotExist(err), nil
	})
	if _, err := cn.admin.CoreV1().Pods(cn.ns).Get(cn.ctx(), "scratch", metav1.GetOptions{}); err != nil {
		t.Fatalf("the ended pod is gone before its deletion: %v", err)
	}
	must(t, cn.admin.CoreV1().Pods(cn.ns).Delete(cn.ctx(), "scratch", metav1.DeleteOptions{}))
	waitFor(t, 90*time.Second, "the ephemeral claim's volume deleted with the pod", func() (bool, error) {
		_, err := cn.admin.CoreV1().PersistentVolumes().Get(cn.ctx(), pvc.Spec.VolumeName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if got := filesHolding(t, d.dataDir, token); len(got) != 0 {
		t.Errorf("the ephemeral volume's data outlived it: %v", got)
	}
}

// tearDownStatefulSet deletes the StatefulSet, its claim (the
// provisioner deletes the volume) and the driver pod, and checks that
// nothing stays mounted under the root directory.
func tearDownStatefulSet(t *testing.T, d *csiDriverPods, pv string) {
	t.Helper()
	cn := d.clusterNode
	web := cn.getPod(t, "web-0")
	must(t, cn.admin.AppsV1().StatefulSets(cn.ns).Delete(cn.ctx(), "web", metav1.DeleteOptions{}))
	// Its volume is unpublished after its API object goes, and only
	// while the driver runs.
	waitFor(t, 60*time.Second, "web-0 gone with its volume", func() (bool, error) {
		_, err := cn.admin.CoreV1().Pods(cn.ns).Get(cn.ctx(), "web-0", metav1.GetOptions{})
		_, statErr := os.Stat(filepath.Join(cn.root, "pods", string(web.UID)))
		return apierrors.IsNotFound(err) && os.IsNotExist(statErr), nil
	})
	calls := (&csiNode{driverLog: d.driverLog()}).grpcRequests(t, "/csi.v1.Node/NodeUnpublishVolume")
	if !strings.Contains(strings.Join(calls, "\n"), csiTarget(cn, web, pv)) {
		t.Errorf("no NodeUnpublishVolume of %s among %v", csiTarget(cn, web, pv), calls)
	}
	must(t, cn.admin.CoreV1().PersistentVolumeClaims(cn.ns).Delete(cn.ctx(), "data-web-0", metav1.DeleteOptions{}))
	waitFor(t, 60*time.Second, "the PV deleted by the provisioner", func() (bool, error) {
		_, err := cn.admin.CoreV1().PersistentVolumes().Get(cn.ctx(), pv, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if got := filesHolding(t, d.dataDir, "kept-"+cn.ns); len(got) != 0 {
		t.Errorf("the deleted volume's data is still on the driver's storage: %v", got)
	}
	must(t, cn.admin.CoreV1().Pods(cn.ns).Delete(cn.ctx(), d.pod.Name, metav1.DeleteOptions{}))
	waitFor(t, 60*time.Second, "the driver pod gone with its directory", func() (bool, error) {
		_, err := cn.admin.CoreV1().Pods(cn.ns).Get(cn.ctx(), d.pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err) && cn.podDirsGone(nil), nil
	})
	if mps := mountsUnder(cn.root + "/"); len(mps) != 0 {
		t.Errorf("mounts left under the root directory: %v", mps)
	}
}

func isMountPoint(dir string) bool {
	for _, m := range mountsUnder(dir) {
		if m == dir {
			return true
		}
	}
	return false
}

// filesHolding lists the files under dir whose content is want (a line).
func filesHolding(t *testing.T, dir, want string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == want {
			out = append(out, p)
		}
		return nil
	})
	must(t, err)
	return out
}
