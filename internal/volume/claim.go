package volume

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// claimOf names the claim a volume uses and whether the pod asks for it
// read-only: a persistentVolumeClaim volume's own, or for a generic
// ephemeral volume the claim the ephemeral-volume controller makes for
// the pod, <pod>-<volume>. ok is false for other volume types.
func claimOf(pod *v1.Pod, vol *v1.Volume) (name string, readOnly, ephemeral, ok bool) {
	switch {
	case vol.PersistentVolumeClaim != nil:
		return vol.PersistentVolumeClaim.ClaimName, vol.PersistentVolumeClaim.ReadOnly, false, true
	case vol.Ephemeral != nil:
		return pod.Name + "-" + vol.Name, false, true, true
	}
	return "", false, false, false
}

// resolveClaim follows the pod's claim to the PersistentVolume bound to
// it, with upstream's checks and words: the claim exists, is not being
// deleted, is Bound to a PV whose claimRef points back at it; an
// ephemeral volume's claim must be owned by the pod, so a claim of the
// same name made by someone else is never mounted.
func (m *Manager) resolveClaim(ctx context.Context, pod *v1.Pod, name string, ephemeral bool) (*v1.PersistentVolume, error) {
	if m.cfg.Client == nil {
		return nil, errNoAPIServer
	}
	wrap := func(err error) error { return fmt.Errorf("error processing PVC %s/%s: %w", pod.Namespace, name, err) }
	pvc, err := m.cfg.Client.CoreV1().PersistentVolumeClaims(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, wrap(fmt.Errorf("failed to fetch PVC from API server: %w", err))
	}
	if ephemeral && !metav1.IsControlledBy(pvc, pod) {
		return nil, wrap(fmt.Errorf("PVC %s/%s was not created for pod %s/%s (pod is not owner)", pvc.Namespace, pvc.Name, pod.Namespace, pod.Name))
	}
	if pvc.DeletionTimestamp != nil {
		return nil, wrap(errors.New("can't start pod because PVC is being deleted"))
	}
	if pvc.Status.Phase != v1.ClaimBound || pvc.Spec.VolumeName == "" {
		return nil, wrap(fmt.Errorf("PVC %s/%s has non-bound phase (%q) or empty pvc.Spec.VolumeName (%q)",
			pvc.Namespace, pvc.Name, pvc.Status.Phase, pvc.Spec.VolumeName))
	}
	pv, err := m.cfg.Client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return nil, wrap(fmt.Errorf("failed to fetch PV %s from API server: %w", pvc.Spec.VolumeName, err))
	}
	switch ref := pv.Spec.ClaimRef; {
	case ref == nil || ref.UID == "":
		return nil, wrap(fmt.Errorf("found PV object %s but it has a nil or empty ClaimRef", pv.Name))
	case ref.UID != pvc.UID:
		return nil, wrap(fmt.Errorf("found PV object %s but its ClaimRef.UID (%s) does not point to claim.UID (%s)", pv.Name, ref.UID, pvc.UID))
	}
	return pv, nil
}
