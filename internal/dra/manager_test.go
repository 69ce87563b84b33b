package dra

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/pluginwatcher"
)

const driverName = "fake.example.com"

// claim is an allocated claim of the fake driver, reserved for pods.
func claim(name string, pods ...*v1.Pod) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}}
	c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
		Results: []resourceapi.DeviceRequestAllocationResult{{Request: "req", Driver: driverName, Pool: "pool", Device: "dev"}},
	}}
	for _, p := range pods {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: p.Name, UID: p.UID})
	}
	return c
}

// podWithClaim is a pod whose container "c" references the pod claim
// "gpu", which names the claim claimName.
func podWithClaim(name, claimName string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{
			ResourceClaims: []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claimName)}},
			Containers: []v1.Container{
				{Name: "c", Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "gpu"}}}},
				{Name: "other"},
			},
		},
	}
}

func newTestManager(t *testing.T, dir string, claims fakeClaims, service string) (*Manager, *fakeDriver) {
	t.Helper()
	d := NewDrivers(DriversConfig{})
	f := startFakeDriver(t, d, driverName, service)
	m, err := New(Config{Dir: dir, Claims: claims, Drivers: d})
	if err != nil {
		t.Fatal(err)
	}
	return m, f
}

// A claim two pods share is prepared once, its CDI devices go to the
// containers that reference it only, and it is unprepared after the
// last pod, on either gRPC service.
func TestSharedClaimPreparedOnceUnpreparedAfterLast(t *testing.T) {
	for _, service := range []string{drapbv1.DRAPluginService, drapbv1beta1.DRAPluginService} {
		t.Run(service, func(t *testing.T) {
			ctx := context.Background()
			a, b := podWithClaim("a", "shared"), podWithClaim("b", "shared")
			dir := t.TempDir()
			m, f := newTestManager(t, dir, fakeClaims{"ns/shared": claim("shared", a, b)}, service)
			for _, p := range []*v1.Pod{a, b, a} {
				if err := m.Prepare(ctx, p); err != nil {
					t.Fatalf("Prepare %s: %v", p.Name, err)
				}
			}
			if n, _ := f.calls("uid-shared"); n != 1 {
				t.Fatalf("NodePrepareResources called %d times for a shared claim, want 1", n)
			}
			ids, err := m.CDIDevices(b, &b.Spec.Containers[0])
			if err != nil || !slices.Equal(ids, []string{"vendor.com/dev=shared"}) {
				t.Fatalf("CDI devices of the claim's container: %v, %v", ids, err)
			}
			if ids, _ := m.CDIDevices(b, &b.Spec.Containers[1]); len(ids) != 0 {
				t.Fatalf("a container without the claim got CDI devices %v", ids)
			}
			dr := m.DynamicResources(a, "c")
			if len(dr) != 1 || dr[0].ClaimName != "shared" || len(dr[0].ClaimResources) != 1 ||
				dr[0].ClaimResources[0].DriverName != driverName || dr[0].ClaimResources[0].CdiDevices[0].Name != "vendor.com/dev=shared" {
				t.Fatalf("dynamic resources of the container: %v", dr)
			}
			if err := m.Unprepare(ctx, a.UID); err != nil {
				t.Fatal(err)
			}
			if _, n := f.calls("uid-shared"); n != 0 {
				t.Fatalf("a claim still used by pod b was unprepared")
			}
			if err := m.Unprepare(ctx, b.UID); err != nil {
				t.Fatal(err)
			}
			if _, n := f.calls("uid-shared"); n != 1 {
				t.Fatalf("NodeUnprepareResources called %d times after the last pod, want 1", n)
			}
			if left, err := readCheckpoint(dir); err != nil || len(left) != 0 {
				t.Fatalf("checkpoint after the last pod: %v, %v", left, err)
			}
		})
	}
}

// A pod waits, with an error naming why, while its claim is not the
// pod's to use; the driver is not called.
func TestPrepareRefuses(t *testing.T) {
	pod := podWithClaim("p", "c1")
	fromTemplate := func(status *string) *v1.Pod {
		p := pod.DeepCopy()
		p.Spec.ResourceClaims[0] = v1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: ptr.To("tmpl")}
		if status != nil {
			p.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: status}}
		}
		return p
	}
	unallocated := claim("c1", pod)
	unallocated.Status.Allocation = nil
	for _, tc := range []struct {
		name   string
		pod    *v1.Pod
		claims fakeClaims
		want   string
	}{
		{"not reserved", pod, fakeClaims{"ns/c1": claim("c1")}, "is not allowed to use ResourceClaim c1"},
		{"not allocated", pod, fakeClaims{"ns/c1": unallocated}, "not allocated"},
		{"missing", pod, fakeClaims{}, "fetch ResourceClaim c1"},
		{"template without status", fromTemplate(nil), fakeClaims{}, "status not set yet"},
		{"template claim not owned", fromTemplate(ptr.To("c1")), fakeClaims{"ns/c1": claim("c1", pod)}, "pod is not owner"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, f := newTestManager(t, t.TempDir(), tc.claims, drapbv1.DRAPluginService)
			err := m.Prepare(context.Background(), tc.pod)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Prepare: %v, want an error with %q", err, tc.want)
			}
			if n, _ := f.calls("uid-c1"); n != 0 {
				t.Fatalf("the driver was called for a claim the pod may not use")
			}
		})
	}
}

// A claim from a template is the one the pod's status names, owned by
// the pod; a pod claim the controller decided needs no claim is skipped.
func TestPrepareTemplateClaim(t *testing.T) {
	p := podWithClaim("p", "")
	p.Spec.ResourceClaims = []v1.PodResourceClaim{
		{Name: "gpu", ResourceClaimTemplateName: ptr.To("tmpl")},
		{Name: "none", ResourceClaimTemplateName: ptr.To("tmpl")},
	}
	p.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("p-gpu-x")}, {Name: "none"}}
	c := claim("p-gpu-x", p)
	c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID, Controller: ptr.To(true)}}
	m, f := newTestManager(t, t.TempDir(), fakeClaims{"ns/p-gpu-x": c}, drapbv1.DRAPluginService)
	if err := m.Prepare(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if n, _ := f.calls("uid-p-gpu-x"); n != 1 {
		t.Fatalf("NodePrepareResources calls: %d, want 1", n)
	}
	if ids, err := m.CDIDevices(p, &p.Spec.Containers[0]); err != nil || !slices.Equal(ids, []string{"vendor.com/dev=p-gpu-x"}) {
		t.Fatalf("CDI devices: %v, %v", ids, err)
	}
}

// A driver's per-claim error keeps the pod waiting, and the claim is
// prepared again on the next try.
func TestPrepareDriverError(t *testing.T) {
	pod := podWithClaim("p", "c1")
	m, f := newTestManager(t, t.TempDir(), fakeClaims{"ns/c1": claim("c1", pod)}, drapbv1.DRAPluginService)
	f.fail = "no such device"
	if err := m.Prepare(context.Background(), pod); err == nil || !strings.Contains(err.Error(), "no such device") {
		t.Fatalf("Prepare: %v, want the driver's error", err)
	}
	f.mu.Lock()
	f.fail = ""
	f.mu.Unlock()
	if err := m.Prepare(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if n, _ := f.calls("uid-c1"); n != 2 {
		t.Fatalf("NodePrepareResources calls: %d, want 2 (the failure, then the retry)", n)
	}
}

// preparedThenRestarted prepares a pod's claim with one manager and
// returns a second on the same directory (a restarted Skiff), with a
// driver of its own.
func preparedThenRestarted(t *testing.T) (*v1.Pod, *Manager, *fakeDriver) {
	t.Helper()
	dir := t.TempDir()
	pod := podWithClaim("p", "c1")
	claims := fakeClaims{"ns/c1": claim("c1", pod)}
	m, _ := newTestManager(t, dir, claims, drapbv1.DRAPluginService)
	if err := m.Prepare(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	m2, f2 := newTestManager(t, dir, claims, drapbv1.DRAPluginService)
	return pod, m2, f2
}

// A restarted manager remembers the prepared claims: a pod gone while
// it was down has its claim unprepared by Reconcile, once the set of
// active pods is complete.
func TestRestartRemembersClaims(t *testing.T) {
	ctx := context.Background()
	pod, m2, f2 := preparedThenRestarted(t)
	if ids, err := m2.CDIDevices(pod, &pod.Spec.Containers[0]); err != nil || len(ids) != 1 {
		t.Fatalf("CDI devices after a restart: %v, %v", ids, err)
	}
	m2.Reconcile(ctx, nil, false)
	if _, n := f2.calls("uid-c1"); n != 0 {
		t.Fatal("unprepared before the active pods were known")
	}
	m2.Reconcile(ctx, map[types.UID]bool{pod.UID: true}, true)
	if _, n := f2.calls("uid-c1"); n != 0 {
		t.Fatal("unprepared the claim of an active pod")
	}
	m2.Reconcile(ctx, map[types.UID]bool{}, true)
	if _, n := f2.calls("uid-c1"); n != 1 {
		t.Fatalf("NodeUnprepareResources calls for a pod gone during the restart: %d, want 1", n)
	}
}

// A claim read back from the checkpoint is prepared again (drivers are
// idempotent), and its devices are the driver's answer, not doubled.
func TestRestartPreparesAgainOnce(t *testing.T) {
	ctx := context.Background()
	pod, m2, f2 := preparedThenRestarted(t)
	for range 2 {
		if err := m2.Prepare(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := f2.calls("uid-c1"); n != 1 {
		t.Fatalf("NodePrepareResources calls after a restart: %d, want 1", n)
	}
	if ids, _ := m2.CDIDevices(pod, &pod.Spec.Containers[0]); len(ids) != 1 {
		t.Fatalf("CDI devices after preparing again: %v, want one", ids)
	}
}

// An unregistered driver keeps the pod waiting with its name; a corrupt
// checkpoint stops the manager rather than forget prepared claims.
func TestUnregisteredDriverAndCorruptCheckpoint(t *testing.T) {
	pod := podWithClaim("p", "c1")
	m, err := New(Config{Dir: t.TempDir(), Claims: fakeClaims{"ns/c1": claim("c1", pod)}, Drivers: NewDrivers(DriversConfig{})})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Prepare(context.Background(), pod); err == nil || !strings.Contains(err.Error(), "DRA driver "+driverName+" is not registered") {
		t.Fatalf("Prepare: %v", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, checkpointFile), []byte(`{"Data":"{}","Checksum":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Dir: dir, Drivers: NewDrivers(DriversConfig{})}); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("New on a corrupt checkpoint: %v", err)
	}
}

// Drivers offering no service Skiff speaks are refused at validation.
func TestValidateServices(t *testing.T) {
	d := NewDrivers(DriversConfig{})
	for _, tc := range []struct {
		versions []string
		ok       bool
	}{
		{[]string{drapbv1.DRAPluginService}, true},
		{[]string{"v1alpha4.DRAPlugin", drapbv1beta1.DRAPluginService}, true},
		{[]string{"v1alpha4.DRAPlugin"}, false},
		{nil, false},
	} {
		err := d.Validate(pluginwatcher.Info{Name: "x", Endpoint: "/x.sock", Versions: tc.versions})
		if (err == nil) != tc.ok {
			t.Errorf("Validate(%v): %v, want ok=%v", tc.versions, err, tc.ok)
		}
	}
	if got, _ := chooseService([]string{drapbv1beta1.DRAPluginService, drapbv1.DRAPluginService}); got != drapbv1.DRAPluginService {
		t.Errorf("chosen service %q, want v1 when both are offered", got)
	}
}

// Claim locks serialize holders of the same key and are forgotten once
// no one holds or waits for them.
func TestKeyedLocks(t *testing.T) {
	var l keyedLocks
	unlock := l.lock([]string{"b", "a", "a"})
	acquired := make(chan struct{})
	go func() { defer close(acquired); l.lock([]string{"a"})() }()
	select {
	case <-acquired:
		t.Fatal("a held key was taken twice")
	default:
	}
	unlock()
	<-acquired
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.locks) != 0 {
		t.Fatalf("locks left after every holder unlocked: %v", l.locks)
	}
}
