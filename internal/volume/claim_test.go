package volume

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func claimPod(vols ...v1.Volume) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "pod-uid"}, Spec: v1.PodSpec{Volumes: vols}}
}

func pvcVolume(name, claim string, readOnly bool) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{
		PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claim, ReadOnly: readOnly}}}
}

// bound returns a claim Bound to a PV of the given source, and the PV.
func bound(claim, pvName string, src v1.PersistentVolumeSource) (*v1.PersistentVolumeClaim, *v1.PersistentVolume) {
	uid := types.UID("uid-" + claim)
	pvc := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: "ns", UID: uid},
		Spec:       v1.PersistentVolumeClaimSpec{VolumeName: pvName},
		Status:     v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound},
	}
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: v1.PersistentVolumeSpec{PersistentVolumeSource: src,
			ClaimRef: &v1.ObjectReference{Namespace: "ns", Name: claim, UID: uid}},
	}
	return pvc, pv
}

func hostPathSource(path string) v1.PersistentVolumeSource {
	return v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: path}}
}

func TestClaimResolution(t *testing.T) {
	dir := t.TempDir()
	okPVC, okPV := bound("data", "pv-data", hostPathSource(dir))
	unbound := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "pending", Namespace: "ns"},
		Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimPending}}
	stolenPVC, stolenPV := bound("stolen", "pv-stolen", hostPathSource(dir))
	stolenPV.Spec.ClaimRef.UID = "someone-else"
	gcePVC, gcePV := bound("gce", "pv-gce", v1.PersistentVolumeSource{GCEPersistentDisk: &v1.GCEPersistentDiskVolumeSource{PDName: "d"}})
	nfsPVC, nfsPV := bound("nfs", "pv-nfs", v1.PersistentVolumeSource{NFS: &v1.NFSVolumeSource{Server: "s", Path: "/"}})
	blockPVC, blockPV := bound("block", "pv-block", hostPathSource(dir))
	blockPVC.Spec.VolumeMode = ptr.To(v1.PersistentVolumeBlock)
	blockPV.Spec.VolumeMode = ptr.To(v1.PersistentVolumeBlock)
	client := fake.NewClientset(okPVC, okPV, unbound, stolenPVC, stolenPV, gcePVC, gcePV, nfsPVC, nfsPV, blockPVC, blockPV)
	m := New(Config{RootDir: t.TempDir(), Client: client})

	for _, c := range []struct {
		vol     v1.Volume
		wantErr string
	}{
		{pvcVolume("v", "missing", false), `failed to fetch PVC from API server`},
		{pvcVolume("v", "pending", false), `non-bound phase ("Pending")`},
		{pvcVolume("v", "stolen", false), `does not point to claim.UID`},
		{pvcVolume("v", "gce", false), `gcePersistentDisk is served only through CSI migration (driver pd.csi.storage.gke.io)`},
		{pvcVolume("v", "nfs", false), `source nfs is not supported`},
		{pvcVolume("v", "block", false), `volumeMode Block is supported for csi volumes only by this version of Skiff, not hostPath`},
		{v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{AWSElasticBlockStore: &v1.AWSElasticBlockStoreVolumeSource{VolumeID: "x"}}},
			`awsElasticBlockStore is served only through CSI migration`},
	} {
		_, err := m.SetUpVolume(context.Background(), claimPod(c.vol), &c.vol)
		if err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%+v: error %v, want %q", c.vol.VolumeSource, err, c.wantErr)
		}
	}

	for _, ro := range []bool{false, true} {
		vol := pvcVolume("v", "data", ro)
		got, err := m.SetUpVolume(context.Background(), claimPod(vol), &vol)
		if err != nil || got.HostPath != dir || got.ReadOnly != ro {
			t.Errorf("readOnly %v: %+v, %v", ro, got, err)
		}
	}
}

func TestEphemeralClaimMustBeOwnedByThePod(t *testing.T) {
	dir := t.TempDir()
	pod := claimPod(v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}})
	pvc, pv := bound("web-scratch", "pv-eph", hostPathSource(dir))
	client := fake.NewClientset(pvc, pv)
	m := New(Config{RootDir: t.TempDir(), Client: client})
	vol := &pod.Spec.Volumes[0]
	if _, err := m.SetUpVolume(context.Background(), pod, vol); err == nil || !strings.Contains(err.Error(), "pod is not owner") {
		t.Fatalf("a claim the pod does not own: %v", err)
	}
	pvc.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}}
	if _, err := client.CoreV1().PersistentVolumeClaims("ns").Update(context.Background(), pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := m.SetUpVolume(context.Background(), pod, vol)
	if err != nil || got.HostPath != dir {
		t.Fatalf("owned claim: %+v, %v", got, err)
	}
}

func TestLocalVolumeNodeAffinityAndBindMount(t *testing.T) {
	disk := t.TempDir()
	if err := os.WriteFile(filepath.Join(disk, "data"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	pvc, pv := bound("local", "pv-local", v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: disk}})
	pv.Spec.NodeAffinity = &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
		MatchExpressions: []v1.NodeSelectorRequirement{{Key: "disk", Operator: v1.NodeSelectorOpIn, Values: []string{"fast"}}},
	}}}}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"disk": "slow"}}}
	m := New(Config{RootDir: t.TempDir(), Client: fake.NewClientset(pvc, pv), Node: func() (*v1.Node, bool) { return node, true }})
	vol := pvcVolume("v", "local", true)
	pod := claimPod(vol)
	if _, err := m.SetUpVolume(context.Background(), pod, &vol); err == nil || !strings.Contains(err.Error(), "NodeAffinity check failed") {
		t.Fatalf("on a node the PV does not fit: %v", err)
	}
	node.Labels["disk"] = "fast"
	got, err := m.SetUpVolume(context.Background(), pod, &vol)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.TearDown(context.Background(), pod.UID) })
	if want := filepath.Join(m.PodDir(pod.UID), "volumes", "kubernetes.io~local-volume", "pv-local"); got.HostPath != want || !got.ReadOnly {
		t.Fatalf("mounted %+v, want %s read-only", got, want)
	}
	if b, err := os.ReadFile(filepath.Join(got.HostPath, "data")); err != nil || string(b) != "hello" {
		t.Fatalf("the bind mount does not show the disk: %q %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(got.HostPath, "new"), nil, 0o644); err == nil {
		t.Error("a read-only local volume took a write")
	}
	// Set up again (a later sync, a restart): the mount is kept, not stacked.
	if _, err := m.SetUpVolume(context.Background(), pod, &vol); err != nil {
		t.Fatal(err)
	}
	if n := len(mountsUnder(got.HostPath)); n != 1 {
		t.Errorf("%d mounts at the volume, want 1", n)
	}
	if err := m.TearDown(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(disk, "data")); err != nil {
		t.Errorf("teardown touched the disk: %v", err)
	}
}

func TestSubPathInsideAClaimStaysInside(t *testing.T) {
	disk := t.TempDir()
	if err := os.Symlink("/etc", filepath.Join(disk, "escape")); err != nil {
		t.Fatal(err)
	}
	pvc, pv := bound("data", "pv-data", v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: disk}})
	m := New(Config{RootDir: t.TempDir(), Client: fake.NewClientset(pvc, pv)})
	vol := pvcVolume("v", "data", false)
	pod := claimPod(vol)
	got, err := m.SetUpVolume(context.Background(), pod, &vol)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.TearDown(context.Background(), pod.UID) })
	target := SubPathTarget(m.PodDir(pod.UID), "v", "c", 0)
	if _, err := BindSubPath(got, "escape/passwd", target); err == nil {
		t.Fatal("a subPath through a symlink out of the claim was mounted")
	}
	if _, err := BindSubPath(got, "app/logs", target); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(disk, "app", "logs")); err != nil || !fi.IsDir() {
		t.Errorf("the subPath was not made inside the claim: %v", err)
	}
}

// A container mounting a block claim, or taking a filesystem claim as a
// device, is refused with upstream's words, before any driver is asked.
func TestVolumeModeMismatchRefused(t *testing.T) {
	dir := t.TempDir()
	fsPVC, fsPV := bound("fs", "pv-fs", hostPathSource(dir))
	blockPVC, blockPV := bound("block", "pv-block", v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "d", VolumeHandle: "h"}})
	blockPV.Spec.VolumeMode = ptr.To(v1.PersistentVolumeBlock)
	m := New(Config{RootDir: t.TempDir(), Client: fake.NewClientset(fsPVC, fsPV, blockPVC, blockPV)})
	for _, c := range []struct {
		claim   string
		ctr     v1.Container
		wantErr string
	}{
		{"fs", v1.Container{Name: "c", VolumeDevices: []v1.VolumeDevice{{Name: "v", DevicePath: "/dev/xvda"}}},
			"volume v has volumeMode Filesystem, but is specified in volumeDevices"},
		{"block", v1.Container{Name: "c", VolumeMounts: []v1.VolumeMount{{Name: "v", MountPath: "/data"}}},
			"volume v has volumeMode Block, but is specified in volumeMounts"},
	} {
		vol := pvcVolume("v", c.claim, false)
		pod := claimPod(vol)
		pod.Spec.InitContainers = []v1.Container{c.ctr}
		if _, err := m.SetUpVolume(context.Background(), pod, &pod.Spec.Volumes[0]); err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("claim %s: %v, want %q", c.claim, err, c.wantErr)
		}
	}
}
