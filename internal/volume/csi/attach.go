package csi

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/internal/volume/volerr"
)

// Attachment, as upstream's kubelet does it with controller-managed
// attach/detach (the Node's volumes.kubernetes.io/controller-managed-
// attach-detach annotation): Skiff attaches nothing itself. A volume
// whose driver needs attachment is reported in the Node's volumesInUse
// as soon as a pod wants it; the attach/detach controller creates the
// VolumeAttachment, the driver's external-attacher attaches it and the
// controller lists it in the Node's volumesAttached. Skiff stages it only
// after all three: reported in use, listed as attached, and its
// VolumeAttachment attached, whose attachmentMetadata is the
// publish_context of NodeStageVolume and NodePublishVolume.

// waitStep is the step upstream names when the VolumeAttachment is not
// attached yet, failed, or is going away.
const waitStep = "MountVolume.WaitForAttach"

// UniqueVolumeName is a CSI volume's name in the Node's volumesInUse
// and volumesAttached, as upstream forms it.
func UniqueVolumeName(driver, handle string) v1.UniqueVolumeName {
	return v1.UniqueVolumeName("kubernetes.io/csi/" + driver + "^" + handle)
}

// attachmentName is the name of the volume's VolumeAttachment for the
// node: csi-<sha256(handle + driver + node)>, as upstream names it.
func attachmentName(handle, driver, node string) string {
	return fmt.Sprintf("csi-%x", sha256.Sum256([]byte(handle+driver+node)))
}

// waitForAttach checks that the volume, which needs attachment, is
// attached to this node, and returns its publish context. It first
// marks the volume in use for the pod. Each check that does not pass yet
// is an error: the volume manager retries with back-off.
func (d *Drivers) waitForAttach(ctx context.Context, podDir string, vol Volume) (map[string]string, error) {
	if d.cfg.VolumeAttachments == nil || d.cfg.Node == nil {
		return nil, fmt.Errorf("driver %s requires attachment (its CSIDriver says attachRequired, or there is no CSIDriver object), "+
			"which Skiff leaves to the attach/detach controller of a cluster: it is standalone, "+
			"or enableControllerAttachDetach is false, and Skiff attaches no volume itself", vol.Driver)
	}
	name := UniqueVolumeName(vol.Driver, vol.Handle)
	if d.use.want(podDir, vol.SpecName, name) && d.cfg.InUseChanged != nil {
		d.cfg.InUseChanged()
	}
	node, _ := d.cfg.Node()
	if node == nil || !slices.Contains(node.Status.VolumesInUse, name) {
		return nil, volerr.Pending(fmt.Errorf("volume %s has not been added to the list of VolumesInUse in the node's volume status", name))
	}
	if !slices.ContainsFunc(node.Status.VolumesAttached, func(a v1.AttachedVolume) bool { return a.Name == name }) {
		return nil, volerr.Pending(fmt.Errorf("volume %s is not attached according to node status", name))
	}
	id := attachmentName(vol.Handle, vol.Driver, d.cfg.NodeName)
	va, err := d.cfg.VolumeAttachments.Get(ctx, id, metav1.GetOptions{})
	if err != nil {
		return nil, volerr.Step(waitStep, fmt.Errorf("volume %s has GET error for volume attachment %s: %w", vol.Handle, id, err))
	}
	if err := attached(va); err != nil {
		return nil, volerr.Step(waitStep, fmt.Errorf("volume %s, volume attachment %s: %w", vol.Handle, id, err))
	}
	return va.Status.AttachmentMetadata, nil
}

// attached is nil when the VolumeAttachment is attached; otherwise it
// says why not: going away, the attacher's error, or not yet.
func attached(va *storagev1.VolumeAttachment) error {
	switch {
	case va.DeletionTimestamp != nil:
		return errors.New("volume attachment is being deleted")
	case va.Status.Attached:
		return nil
	case va.Status.AttachError != nil:
		return fmt.Errorf("attach failed: %s", va.Status.AttachError.Message)
	}
	return errors.New("not attached yet")
}
