package statusmanager

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// The pod's resource claim statuses are the resource claim controller's:
// the kubelet's status, which has none, keeps the apiserver's, so its
// patch does not remove them (NodeRestriction would refuse it).
func TestMergeKeepsResourceClaimStatuses(t *testing.T) {
	api := v1.PodStatus{
		ResourceClaimStatuses:       []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr("p-gpu-x")}},
		ExtendedResourceClaimStatus: &v1.PodExtendedResourceClaimStatus{ResourceClaimName: "p-extended"},
	}
	out := mergeStatus(api, v1.PodStatus{Phase: v1.PodRunning})
	if !equality.Semantic.DeepEqual(out.ResourceClaimStatuses, api.ResourceClaimStatuses) ||
		!equality.Semantic.DeepEqual(out.ExtendedResourceClaimStatus, api.ExtendedResourceClaimStatus) {
		t.Fatalf("merged claim statuses %v %v, want the apiserver's", out.ResourceClaimStatuses, out.ExtendedResourceClaimStatus)
	}
	if out.Phase != v1.PodRunning {
		t.Fatalf("merged phase %s, want the kubelet's", out.Phase)
	}
}
