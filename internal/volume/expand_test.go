package volume

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/skiff-sh/skiff/internal/volume/csi"
)

// fakeCSI expands with err, recording each call and the claim's storage
// resize status as the apiserver has it during the call.
type fakeCSI struct {
	client   *fake.Clientset
	err      error
	expanded []csi.Volume
	sizes    []int64
	during   []v1.ClaimResourceStatus
}

func (f *fakeCSI) SetUp(context.Context, *v1.Pod, string, csi.Volume) (string, error) { return "", nil }
func (f *fakeCSI) TearDownPod(context.Context, string) error                          { return nil }
func (f *fakeCSI) RequiresRepublish(context.Context, string) bool                     { return false }

func (f *fakeCSI) Expand(ctx context.Context, _ string, vol csi.Volume, size int64) error {
	f.expanded, f.sizes = append(f.expanded, vol), append(f.sizes, size)
	pvc, err := f.client.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "grow", metav1.GetOptions{})
	if err != nil {
		return err
	}
	f.during = append(f.during, pvc.Status.AllocatedResourceStatuses[v1.ResourceStorage])
	return f.err
}

// growing is a claim the resizer grew from 1Gi to 2Gi, awaiting the node.
func growing(t *testing.T, csiErr error, readOnly bool) (*Manager, *fakeCSI, *v1.Pod) {
	t.Helper()
	pvc, pv := bound("grow", "pv-grow", v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "d", VolumeHandle: "h",
		NodeExpandSecretRef: &v1.SecretReference{Name: "exp", Namespace: "ns"}}})
	pv.Spec.Capacity = v1.ResourceList{v1.ResourceStorage: resource.MustParse("2Gi")}
	pvc.Status.Capacity = v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}
	pvc.Status.AllocatedResourceStatuses = map[v1.ResourceName]v1.ClaimResourceStatus{v1.ResourceStorage: v1.PersistentVolumeClaimNodeResizePending}
	pvc.Status.Conditions = []v1.PersistentVolumeClaimCondition{
		{Type: v1.PersistentVolumeClaimFileSystemResizePending, Status: v1.ConditionTrue},
		{Type: "Other", Status: v1.ConditionTrue},
	}
	secret := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "exp", Namespace: "ns"}, Data: map[string][]byte{"key": []byte("s3cret")}}
	client := fake.NewClientset(pvc, pv, secret)
	f := &fakeCSI{client: client, err: csiErr}
	m := New(Config{RootDir: t.TempDir(), Client: client, CSI: f})
	vol := pvcVolume("data", "grow", readOnly)
	pod := claimPod(vol)
	pod.Spec.NodeName = "n1"
	return m, f, pod
}

func (f *fakeCSI) claim(t *testing.T) *v1.PersistentVolumeClaim {
	t.Helper()
	pvc, err := f.client.CoreV1().PersistentVolumeClaims("ns").Get(context.Background(), "grow", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pvc
}

func conditionTypes(pvc *v1.PersistentVolumeClaim) string {
	var out []string
	for _, c := range pvc.Status.Conditions {
		out = append(out, string(c.Type))
	}
	return strings.Join(out, ",")
}

// The claim is marked NodeResizeInProgress while the driver grows the
// volume to the PV's size with the expand secrets; then its status has
// the new capacity, no storage resize status and no resize condition;
// a check after that has nothing to do.
func TestExpandVolumeFinishesTheClaimsResize(t *testing.T) {
	m, f, pod := growing(t, nil, false)
	res, err := m.ExpandVolume(context.Background(), pod, &pod.Spec.Volumes[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(f.expanded) != 1 || f.sizes[0] != 2<<30 || f.expanded[0].SpecName != "pv-grow" || f.expanded[0].ExpandSecrets["key"] != "s3cret" {
		t.Fatalf("expanded %+v to %v", f.expanded, f.sizes)
	}
	if f.during[0] != v1.PersistentVolumeClaimNodeResizeInProgress {
		t.Errorf("resize status during the driver's call: %q", f.during[0])
	}
	pvc := f.claim(t)
	if c := pvc.Status.Capacity[v1.ResourceStorage]; c.String() != "2Gi" || pvc.Status.AllocatedResourceStatuses != nil ||
		conditionTypes(pvc) != "Other" {
		t.Errorf("claim status after: %+v", pvc.Status)
	}
	if res == nil || res.Reason != ReasonResizeSucceeded || res.EventType != v1.EventTypeNormal ||
		res.Message != `MountVolume.NodeExpandVolume succeeded for volume "pv-grow" n1` {
		t.Errorf("outcome %+v", res)
	}
	if res, err := m.ExpandVolume(context.Background(), pod, &pod.Spec.Volumes[0]); res != nil || err != nil || len(f.expanded) != 1 {
		t.Errorf("a second check: %+v, %v, %d calls", res, err, len(f.expanded))
	}
}

// A driver's errors, as upstream classifies them: an infeasible size
// marks the claim NodeResizeInfeasible (no retry), a final error adds a
// NodeResizeError condition and is retried, a transient one only
// retried; an in-use refusal is reported, not retried; a read-only
// claim is not expanded.
func TestExpandVolumeDriverErrors(t *testing.T) {
	for _, c := range []struct {
		name       string
		err        error
		readOnly   bool
		wantErr    bool
		wantStatus v1.ClaimResourceStatus
		wantConds  string
		wantCalls  int
	}{
		{"infeasible", status.Error(codes.OutOfRange, "too big"), false, true, v1.PersistentVolumeClaimNodeResizeInfeasible,
			"FileSystemResizePending,Other,NodeResizeError", 1},
		{"final", status.Error(codes.Internal, "broken"), false, true, v1.PersistentVolumeClaimNodeResizeInProgress,
			"FileSystemResizePending,Other,NodeResizeError", 2},
		{"unsupported", csi.ErrNoNodeExpansion, false, true, v1.PersistentVolumeClaimNodeResizeInProgress,
			"FileSystemResizePending,Other,NodeResizeError", 2},
		{"transient", status.Error(codes.Unavailable, "later"), false, true, v1.PersistentVolumeClaimNodeResizeInProgress,
			"FileSystemResizePending,Other", 2},
		{"in use", status.Error(codes.FailedPrecondition, "offline only"), false, false, v1.PersistentVolumeClaimNodeResizeInProgress,
			"FileSystemResizePending,Other,NodeResizeError", 1},
		{"read-only", nil, true, false, v1.PersistentVolumeClaimNodeResizePending, "FileSystemResizePending,Other", 0},
	} {
		m, f, pod := growing(t, c.err, c.readOnly)
		res, err := m.ExpandVolume(context.Background(), pod, &pod.Spec.Volumes[0])
		if (err != nil) != c.wantErr || (err != nil && !errors.Is(err, c.err)) {
			t.Errorf("%s: error %v", c.name, err)
		}
		if !c.wantErr && (res == nil || res.Reason != ReasonResizeFailed || res.EventType != v1.EventTypeWarning || !res.Stop) {
			t.Errorf("%s: outcome %+v", c.name, res)
		}
		pvc := f.claim(t)
		if got := pvc.Status.AllocatedResourceStatuses[v1.ResourceStorage]; got != c.wantStatus || conditionTypes(pvc) != c.wantConds {
			t.Errorf("%s: claim status %q, conditions %s", c.name, got, conditionTypes(pvc))
		}
		if c.wantErr { // the volume manager retries after an error
			_, _ = m.ExpandVolume(context.Background(), pod, &pod.Spec.Volumes[0])
		}
		if len(f.expanded) != c.wantCalls {
			t.Errorf("%s: %d calls to the driver, want %d", c.name, len(f.expanded), c.wantCalls)
		}
	}
}
