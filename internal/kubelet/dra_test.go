package kubelet

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/devicemanager"
	"github.com/skiff-sh/skiff/internal/dra"
)

// A pod whose claim is not reserved for it waits: the hook fails with
// upstream's FailedPrepareDynamicResources event, and its containers get
// no CDI device; a pod without claims passes.
func TestDRAHookRefusesUnreservedClaim(t *testing.T) {
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c1", UID: "claim-uid"}}
	claim.Status.Allocation = &resourceapi.AllocationResult{}
	client := fake.NewClientset(claim)
	m, err := dra.New(dra.Config{Dir: t.TempDir(), Claims: claimGetter{client.ResourceV1()}, Drivers: dra.NewDrivers(dra.DriversConfig{})})
	if err != nil {
		t.Fatal(err)
	}
	rec := &fakeRecorder{}
	h := draHook{dra: m, recorder: rec}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "pod-uid"}}
	if err := h.Prestart(context.Background(), pod, &podRun{}); err != nil || len(rec.events) != 0 {
		t.Fatalf("a pod without claims: %v, events %v", err, rec.events)
	}
	pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("c1")}}
	pod.Spec.Containers = []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "gpu"}}}}}
	err = h.Prestart(context.Background(), pod, &podRun{})
	if err == nil || !strings.Contains(err.Error(), "is not allowed to use ResourceClaim c1") {
		t.Fatalf("Prestart: %v, want the claim refused", err)
	}
	if len(rec.events) != 1 || !strings.Contains(rec.events[0], "FailedPrepareDynamicResources") {
		t.Fatalf("events %v, want one FailedPrepareDynamicResources", rec.events)
	}
	devices := containerDevices{plugins: &devicemanager.Manager{}, dra: m}
	if cfg, err := devices.RunOptions(context.Background(), pod, &pod.Spec.Containers[0]); err == nil {
		t.Fatalf("a container of a claim never prepared got %v, want an error", cfg)
	}
}
