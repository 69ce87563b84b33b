package volume

import (
	"context"
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// patchClaimStatus patches the claim's status with what mutate changes
// of a copy, as a strategic merge patch of the status subresource (a
// patch, not an update, so that fields this client does not know
// survive). With rvCheck the patch carries the claim's resourceVersion,
// so that it fails on a claim changed since it was read, as upstream's.
func patchClaimStatus(ctx context.Context, pvcs corev1client.PersistentVolumeClaimInterface, old *v1.PersistentVolumeClaim,
	rvCheck bool, mutate func(*v1.PersistentVolumeClaimStatus)) (*v1.PersistentVolumeClaim, error) {
	updated := old.DeepCopy()
	mutate(&updated.Status)
	oldJSON, err := json.Marshal(old)
	if err != nil {
		return nil, err
	}
	newJSON, err := json.Marshal(updated)
	if err != nil {
		return nil, err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, &v1.PersistentVolumeClaim{})
	if err != nil {
		return nil, fmt.Errorf("patch of PVC %s/%s: %w", old.Namespace, old.Name, err)
	}
	if rvCheck {
		var m map[string]any
		if err := json.Unmarshal(patch, &m); err != nil {
			return nil, err
		}
		m["metadata"] = map[string]any{"resourceVersion": old.ResourceVersion}
		if patch, err = json.Marshal(m); err != nil {
			return nil, err
		}
	}
	got, err := pvcs.Patch(ctx, old.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return nil, fmt.Errorf("patch status of PVC %s/%s: %w", old.Namespace, old.Name, err)
	}
	return got, nil
}

// setStorageResizeStatus sets the claim's storage resize status; empty
// removes it (and the map, when nothing else is left).
func setStorageResizeStatus(s *v1.PersistentVolumeClaimStatus, st v1.ClaimResourceStatus) {
	if st == "" {
		delete(s.AllocatedResourceStatuses, v1.ResourceStorage)
		if len(s.AllocatedResourceStatuses) == 0 {
			s.AllocatedResourceStatuses = nil
		}
		return
	}
	if s.AllocatedResourceStatuses == nil {
		s.AllocatedResourceStatuses = map[v1.ResourceName]v1.ClaimResourceStatus{}
	}
	s.AllocatedResourceStatuses[v1.ResourceStorage] = st
}

func setQuantity(l v1.ResourceList, q resource.Quantity) v1.ResourceList {
	if l == nil {
		l = v1.ResourceList{}
	}
	l[v1.ResourceStorage] = q
	return l
}

// resizeConditions are the claim conditions of a resize.
var resizeConditions = map[v1.PersistentVolumeClaimConditionType]bool{
	v1.PersistentVolumeClaimResizing: true, v1.PersistentVolumeClaimFileSystemResizePending: true,
	v1.PersistentVolumeClaimControllerResizeError: true, v1.PersistentVolumeClaimNodeResizeError: true,
}

// mergeResizeConditions drops the claim's resize conditions (nil add),
// or sets add among them, keeping the others (and an unchanged add's
// transition time), as upstream's MergeResizeConditionOnPVC.
func mergeResizeConditions(s *v1.PersistentVolumeClaimStatus, add *v1.PersistentVolumeClaimCondition) {
	var out []v1.PersistentVolumeClaimCondition
	added := false
	for _, c := range s.Conditions {
		switch {
		case !resizeConditions[c.Type]:
			out = append(out, c)
		case add == nil: // dropped
		case c.Type == add.Type:
			if c.Status != add.Status {
				c = *add
			}
			out = append(out, c)
			added = true
		default:
			out = append(out, c)
		}
	}
	if add != nil && !added {
		out = append(out, *add)
	}
	s.Conditions = out
}
