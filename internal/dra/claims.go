package dra

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// errNoClaimStatus is returned while the pod's claim from a template has
// not been named in the pod's status yet: the pod waits for it.
var errNoClaimStatus = errors.New("pod ResourceClaim status not set yet")

// claimName is the name of the ResourceClaim a pod claim stands for, as
// the resource claim controller records it: the claim named in the spec,
// or the one generated from a template and named in the pod's status.
// ok is false when no claim is needed (the controller decided none was);
// fromTemplate says the claim must be owned by the pod.
func claimName(pod *v1.Pod, pc *v1.PodResourceClaim) (name string, ok, fromTemplate bool, err error) {
	switch {
	case pc.ResourceClaimName != nil:
		return *pc.ResourceClaimName, true, false, nil
	case pc.ResourceClaimTemplateName != nil:
		for _, s := range pod.Status.ResourceClaimStatuses {
			if s.Name == pc.Name {
				if s.ResourceClaimName == nil {
					return "", false, true, nil
				}
				return *s.ResourceClaimName, true, true, nil
			}
		}
		return "", false, true, fmt.Errorf("pod claim %s: %w", pc.Name, errNoClaimStatus)
	default:
		return "", false, false, fmt.Errorf("pod claim %s: neither resourceClaimName nor resourceClaimTemplateName is set", pc.Name)
	}
}

// isOwnedByPod says whether the pod is the claim's controlling owner, as
// a claim generated from the pod's template must be.
func isOwnedByPod(pod *v1.Pod, claim *resourceapi.ResourceClaim) error {
	if ref := metav1.GetControllerOf(claim); ref != nil && ref.UID == pod.UID {
		return nil
	}
	return fmt.Errorf("ResourceClaim %s was not created for pod %s/%s (pod is not owner)", claim.Name, pod.Namespace, pod.Name)
}

// isReservedForPod says whether the claim's status reserves it for the pod.
func isReservedForPod(pod *v1.Pod, claim *resourceapi.ResourceClaim) bool {
	for _, r := range claim.Status.ReservedFor {
		if r.UID == pod.UID && r.Resource == "pods" && r.APIGroup == "" {
			return true
		}
	}
	return false
}
