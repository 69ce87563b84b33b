package volume

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/skiff-sh/skiff/internal/volume/csi"
)

// The node side of a claim's expansion, as upstream's node expander:
// once external-resizer has grown the volume (the PV's capacity is above
// the claim's status capacity) and marked the claim NodeResizePending,
// the kubelet marks it NodeResizeInProgress, has the driver grow the
// volume where the pod uses it (NodeExpandVolume), and then writes the
// new capacity into the claim's status, drops its storage resize status
// and its resize conditions (FileSystemResizePending among them).

// Expansion is what ExpandVolume did that the pod and the claim should
// hear of, as an event.
type Expansion struct {
	PVC                        *v1.PersistentVolumeClaim
	EventType, Reason, Message string
	// Stop: the volume is not to be expanded again while the pod has it
	// set up (read-only, or the driver expands it only when unused).
	Stop bool
}

// Upstream's event reasons.
const (
	ReasonResizeSucceeded = "FileSystemResizeSuccessful"
	ReasonResizeFailed    = "FileSystemResizeFailed"
)

// Expands tells whether a volume is a claim, which may grow while in use.
func Expands(vol *v1.Volume) bool {
	return vol.PersistentVolumeClaim != nil || vol.Ephemeral != nil
}

// ExpandVolume expands the pod's claim volume on the node if its claim
// awaits that; nil and no error when there is nothing to do. An error
// asks for a retry.
func (m *Manager) ExpandVolume(ctx context.Context, pod *v1.Pod, vol *v1.Volume) (*Expansion, error) {
	name, readOnly, _, ok := claimOf(pod, vol)
	if !ok || m.cfg.Client == nil || m.cfg.CSI == nil {
		return nil, nil
	}
	pvcs := m.cfg.Client.CoreV1().PersistentVolumeClaims(pod.Namespace)
	pvc, err := pvcs.Get(ctx, name, metav1.GetOptions{})
	if err != nil || pvc.Spec.VolumeName == "" {
		return nil, err
	}
	pv, err := m.cfg.Client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if pv.Spec.CSI == nil || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID {
		return nil, nil
	}
	size, due := nodeExpansionDue(pvc, pv)
	if !due {
		return nil, nil
	}
	msg := func(outcome string) string {
		return fmt.Sprintf("MountVolume.NodeExpandVolume %s for volume %q %s", outcome, pv.Name, pod.Spec.NodeName)
	}
	cv := csiPVVolume(pv, readOnly)
	if cv.ReadOnly {
		return &Expansion{PVC: pvc, EventType: v1.EventTypeWarning, Reason: ReasonResizeFailed, Message: fmt.Sprintf("MountVolume.NodeExpandVolume failed for volume %q requested read-only file system", pv.Name), Stop: true}, nil
	}
	if cv.ExpandSecrets, err = m.csiSecretRef(ctx, pod, pv.Spec.CSI.NodeExpandSecretRef); err != nil {
		return nil, err
	}
	pvc, err = patchClaimStatus(ctx, pvcs, pvc, true, func(s *v1.PersistentVolumeClaimStatus) {
		setStorageResizeStatus(s, v1.PersistentVolumeClaimNodeResizeInProgress)
	})
	if err != nil {
		return nil, fmt.Errorf("MountVolume.NodeExpandVolume failed to mark node expansion in progress: %w", err)
	}
	if err := m.cfg.CSI.Expand(ctx, m.PodDir(pod.UID), cv, size.Value()); err != nil {
		return expansionFailed(ctx, pvcs, pvc, msg("failed"), err)
	}
	done, err := patchClaimStatus(ctx, pvcs, pvc, true, func(s *v1.PersistentVolumeClaimStatus) {
		s.Capacity = setQuantity(s.Capacity, size)
		setStorageResizeStatus(s, "")
		mergeResizeConditions(s, nil)
	})
	if err != nil {
		return nil, fmt.Errorf("MountVolume.NodeExpandVolume update pvc status failed: %w", err)
	}
	return &Expansion{PVC: done, EventType: v1.EventTypeNormal, Reason: ReasonResizeSucceeded, Message: msg("succeeded")}, nil
}

// nodeExpansionDue is the size to grow the claim's volume to, when the
// node is to do it: the PV is larger than the claim's status says, and
// the resizer left the claim NodeResizePending (or a node started and
// did not finish: NodeResizeInProgress). A claim marked infeasible, or
// left to the controller, is not touched.
func nodeExpansionDue(pvc *v1.PersistentVolumeClaim, pv *v1.PersistentVolume) (resource.Quantity, bool) {
	size, cur := pv.Spec.Capacity[v1.ResourceStorage], pvc.Status.Capacity[v1.ResourceStorage]
	if size.Cmp(cur) <= 0 {
		return size, false
	}
	switch pvc.Status.AllocatedResourceStatuses[v1.ResourceStorage] {
	case v1.PersistentVolumeClaimNodeResizePending, v1.PersistentVolumeClaimNodeResizeInProgress:
		return size, true
	}
	return size, false
}

// expansionFailed records a final failure of the driver in the claim's
// status as upstream: a NodeResizeError condition, and for an
// infeasible size (InvalidArgument, OutOfRange) NodeResizeInfeasible,
// which stops retries. A driver that cannot expand an in-use volume
// (FailedPrecondition) is not asked again for this pod.
func expansionFailed(ctx context.Context, pvcs corev1client.PersistentVolumeClaimInterface, pvc *v1.PersistentVolumeClaim, msg string, err error) (*Expansion, error) {
	st, isStatus := status.FromError(err)
	final := errors.Is(err, csi.ErrNoNodeExpansion) || (isStatus && !transient(st.Code()))
	if final {
		infeasible := isStatus && (st.Code() == codes.InvalidArgument || st.Code() == codes.OutOfRange)
		cond := v1.PersistentVolumeClaimCondition{Type: v1.PersistentVolumeClaimNodeResizeError, Status: v1.ConditionTrue,
			LastTransitionTime: metav1.Now(), Message: fmt.Sprintf("failed to expand pvc with %v", err)}
		if _, perr := patchClaimStatus(ctx, pvcs, pvc, false, func(s *v1.PersistentVolumeClaimStatus) {
			if infeasible {
				setStorageResizeStatus(s, v1.PersistentVolumeClaimNodeResizeInfeasible)
			}
			mergeResizeConditions(s, &cond)
		}); perr != nil {
			err = errors.Join(err, fmt.Errorf("mark node expansion as failed: %w", perr))
		}
	}
	if isStatus && st.Code() == codes.FailedPrecondition {
		return &Expansion{PVC: pvc, EventType: v1.EventTypeWarning, Reason: ReasonResizeFailed, Message: fmt.Sprintf("%s: %v", msg, err), Stop: true}, nil
	}
	return nil, fmt.Errorf("%s: %w", msg, err)
}

// transient are the gRPC codes after which the driver may still be
// working on the call (upstream's non-final errors).
func transient(c codes.Code) bool {
	switch c {
	case codes.Canceled, codes.DeadlineExceeded, codes.Unavailable, codes.ResourceExhausted, codes.Aborted:
		return true
	}
	return false
}
