//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Claims without CSI: PersistentVolumes of hostPath (local-path-
// provisioner's kind) and local sources, generic ephemeral volumes, and
// the refusals. The control plane's PV controller binds each claim to the
// PV made for it (pre-bound through the PV's claimRef); the ephemeral
// volume controller makes the claims of ephemeral volumes.

// claimPV is a PV of src pre-bound to the claim ns/claim, with no storage
// class, deleted after the test.
func (cn *clusterNode) claimPV(t *testing.T, claim string, src v1.PersistentVolumeSource, affinity *v1.VolumeNodeAffinity) *v1.PersistentVolume {
	t.Helper()
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: cn.ns + "-" + claim},
		Spec: v1.PersistentVolumeSpec{
			Capacity:               v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Mi")},
			AccessModes:            []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			PersistentVolumeSource: src,
			ClaimRef:               &v1.ObjectReference{Namespace: cn.ns, Name: claim},
			NodeAffinity:           affinity,
		},
	}
	pv, err := cn.admin.CoreV1().PersistentVolumes().Create(cn.ctx(), pv, metav1.CreateOptions{})
	must(t, err)
	t.Cleanup(func() { _ = cn.admin.CoreV1().PersistentVolumes().Delete(cn.ctx(), pv.Name, metav1.DeleteOptions{}) })
	return pv
}

func claimSpec() v1.PersistentVolumeClaimSpec {
	return v1.PersistentVolumeClaimSpec{
		AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
		StorageClassName: ptr.To(""),
		Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Mi")}},
	}
}

// claim makes the claim name in the test namespace.
func (cn *clusterNode) claim(t *testing.T, name string) {
	t.Helper()
	pvc := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: claimSpec()}
	_, err := cn.admin.CoreV1().PersistentVolumeClaims(cn.ns).Create(cn.ctx(), pvc, metav1.CreateOptions{})
	must(t, err)
}

// claimPod runs script once with the claim mounted at /data.
func claimPod(name, claim string, readOnly bool, script string) *v1.Pod {
	p := busyboxPod(name, script)
	p.Spec.RestartPolicy = v1.RestartPolicyNever
	p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{
		PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claim, ReadOnly: readOnly}}}}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	return p
}

func succeeded(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded }

// waitingCreating: the pod waits for its volumes, its container in
// ContainerCreating, as upstream shows it.
func waitingCreating(p *v1.Pod) bool {
	if p.Status.Phase != v1.PodPending || len(p.Status.ContainerStatuses) == 0 {
		return false
	}
	w := p.Status.ContainerStatuses[0].State.Waiting
	return w != nil && w.Reason == "ContainerCreating"
}

func hostDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	must(t, os.Chmod(dir, 0o777))
	return dir
}

// A hostPath PV: what one pod writes, the next pod sees after the first
// is deleted; read-only through the claim's readOnly, and a subPath
// inside the claim.
func TestClaimHostPathPVOutlivesPod(t *testing.T) {
	cn := sharedNode(t)
	dir := hostDir(t)
	cn.claimPV(t, "data", v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: dir}}, nil)
	cn.claim(t, "data")

	cn.createPod(t, claimPod("writer", "data", false, "mkdir -p /data/sub && echo kept > /data/sub/f"))
	cn.waitPod(t, cn.ns, "writer", 60*time.Second, "Succeeded", succeeded)
	must(t, cn.admin.CoreV1().Pods(cn.ns).Delete(cn.ctx(), "writer", metav1.DeleteOptions{}))
	if b, err := os.ReadFile(filepath.Join(dir, "sub", "f")); err != nil || string(b) != "kept\n" {
		t.Fatalf("the writer's file on the PV's path: %q %v", b, err)
	}

	reader := claimPod("reader", "data", true,
		`test "$(cat /data/sub/f)" = kept && test "$(cat /sub/f)" = kept && ! touch /data/new 2>/dev/null`)
	reader.Spec.Containers[0].VolumeMounts = append(reader.Spec.Containers[0].VolumeMounts,
		v1.VolumeMount{Name: "data", MountPath: "/sub", SubPath: "sub"})
	cn.createPod(t, reader)
	p := cn.waitPod(t, cn.ns, "reader", 60*time.Second, "finished", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
	})
	if p.Status.Phase != v1.PodSucceeded {
		t.Fatalf("the reader did not see the data read-only: %+v", p.Status.ContainerStatuses)
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); err == nil {
		t.Error("a read-only claim took a write")
	}
}

func hostnameAffinity(node string) *v1.VolumeNodeAffinity {
	return &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
		MatchExpressions: []v1.NodeSelectorRequirement{{Key: v1.LabelHostname, Operator: v1.NodeSelectorOpIn, Values: []string{node}}},
	}}}}
}

// A local PV is bind-mounted when its node affinity names this node, and
// refused, with the cause in a FailedMount event, when it names another.
func TestClaimLocalPVNodeAffinity(t *testing.T) {
	cn := sharedNode(t)
	disk := hostDir(t)
	must(t, os.WriteFile(filepath.Join(disk, "label"), []byte("disk-1"), 0o644))
	cn.claimPV(t, "here", v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: disk}}, hostnameAffinity(cn.hostname()))
	cn.claim(t, "here")
	cn.claimPV(t, "there", v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: disk}}, hostnameAffinity("another-node"))
	cn.claim(t, "there")

	cn.createPod(t, claimPod("local", "here", false, `test "$(cat /data/label)" = disk-1 && echo w > /data/written`))
	cn.createPod(t, claimPod("elsewhere", "there", false, "true"))
	cn.waitPod(t, cn.ns, "local", 60*time.Second, "Succeeded", succeeded)
	if _, err := os.Stat(filepath.Join(disk, "written")); err != nil {
		t.Errorf("the pod's write is not on the local disk: %v", err)
	}
	cn.waitPodEvent(t, "elsewhere", "FailedMount", "NodeAffinity check failed", 60*time.Second)
	cn.waitPod(t, cn.ns, "elsewhere", 10*time.Second, "ContainerCreating", waitingCreating)
}

// A pod whose claim is not bound waits in ContainerCreating with a
// FailedMount event naming the claim, and starts by itself once the claim
// is bound.
func TestClaimUnboundThenBound(t *testing.T) {
	cn := sharedNode(t)
	cn.claim(t, "late")
	cn.createPod(t, claimPod("patient", "late", false, "echo ok > /data/f"))
	cn.waitPodEvent(t, "patient", "FailedMount", "PVC "+cn.ns+"/late has non-bound phase", 60*time.Second)
	cn.waitPod(t, cn.ns, "patient", 10*time.Second, "ContainerCreating", waitingCreating)

	dir := hostDir(t)
	cn.claimPV(t, "late", v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: dir}}, nil)
	cn.waitPod(t, cn.ns, "patient", 90*time.Second, "Succeeded once the claim is bound", succeeded)
	if _, err := os.Stat(filepath.Join(dir, "f")); err != nil {
		t.Errorf("the pod did not write to the bound PV: %v", err)
	}
}

// A generic ephemeral volume: the controller makes the claim
// <pod>-<volume> owned by the pod, and the pod mounts the PV bound to it.
func TestGenericEphemeralVolume(t *testing.T) {
	cn := sharedNode(t)
	dir := hostDir(t)
	cn.claimPV(t, "eph-scratch", v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: dir}}, nil)
	p := busyboxPod("eph", "echo ephemeral > /scratch/f")
	p.Spec.RestartPolicy = v1.RestartPolicyNever
	p.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{
		VolumeClaimTemplate: &v1.PersistentVolumeClaimTemplate{Spec: claimSpec()}}}}}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	pod := cn.createPod(t, p)
	cn.waitPod(t, cn.ns, "eph", 90*time.Second, "Succeeded", succeeded)
	if b, err := os.ReadFile(filepath.Join(dir, "f")); err != nil || string(b) != "ephemeral\n" {
		t.Fatalf("the pod's write on the ephemeral claim's PV: %q %v", b, err)
	}
	pvc, err := cn.admin.CoreV1().PersistentVolumeClaims(cn.ns).Get(cn.ctx(), "eph-scratch", metav1.GetOptions{})
	must(t, err)
	if !metav1.IsControlledBy(pvc, pod) {
		t.Errorf("claim %s is not owned by the pod: %v", pvc.Name, pvc.OwnerReferences)
	}
}

// A volume type upstream serves only through CSI migration is refused
// with a FailedMount event naming it; the pod waits, it never starts
// half-equipped.
func TestInTreeVolumeRefused(t *testing.T) {
	cn := sharedNode(t)
	cn.claimPV(t, "share", v1.PersistentVolumeSource{AzureFile: &v1.AzureFilePersistentVolumeSource{
		SecretName: "azure-secret", ShareName: "share"}}, nil)
	cn.claim(t, "share")
	cn.createPod(t, claimPod("azure", "share", false, "true"))
	cn.waitPodEvent(t, "azure", "FailedMount", "azureFile is served only through CSI migration", 60*time.Second)
	cn.waitPod(t, cn.ns, "azure", 10*time.Second, "ContainerCreating", waitingCreating)
}
