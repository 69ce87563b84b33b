package csi

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/volume/fsgroup"
	"github.com/skiff-sh/skiff/internal/volume/mountinfo"
)

// The pod's fsGroup reaches a CSI volume in one of two ways, as upstream:
// a driver with the VOLUME_MOUNT_GROUP node capability gets it in the
// request (volume_mount_group, at stage and at publish) and applies it
// itself; for any other driver Skiff gives the published volume's files
// the group after publishing, when the CSIDriver's fsGroupPolicy allows:
// File always, ReadWriteOnceWithFSType (the default) for a volume with an
// fsType that is ReadWriteOnce(Pod) or inline, None never.

// podFSGroup is the pod's fsGroup and fsGroupChangePolicy.
func podFSGroup(pod *v1.Pod) (*int64, *v1.PodFSGroupChangePolicy) {
	sc := pod.Spec.SecurityContext
	if sc == nil {
		return nil, nil
	}
	return sc.FSGroup, sc.FSGroupChangePolicy
}

// hasCapability asks the driver (NodeGetCapabilities) for one node
// capability.
func (c *nodeClient) hasCapability(ctx context.Context, want csipb.NodeServiceCapability_RPC_Type) (bool, error) {
	caps, err := c.capabilities(ctx)
	return caps[want], err
}

// mountGroupCapability is the volume's capability for a stage or publish
// request, with the pod's fsGroup as volume_mount_group when the driver
// applies it itself, and the access mode as the driver's node
// capabilities map it. The driver is asked each time, as upstream does:
// once for VOLUME_MOUNT_GROUP, then once for SINGLE_NODE_MULTI_WRITER
// right before the call.
func mountGroupCapability(ctx context.Context, c *nodeClient, vol Volume, pod *v1.Pod) (*csipb.VolumeCapability, error) {
	byDriver, err := c.hasCapability(ctx, csipb.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP)
	if err != nil {
		return nil, err
	}
	multiWriter, err := c.hasCapability(ctx, csipb.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER)
	if err != nil {
		return nil, err
	}
	vc := capability(vol, multiWriter)
	if gid, _ := podFSGroup(pod); byDriver && gid != nil {
		vc.GetMount().VolumeMountGroup = strconv.FormatInt(*gid, 10)
	}
	return vc, nil
}

// publish publishes the volume and then, if Skiff is the one to apply
// the pod's fsGroup, applies it; a volume whose group cannot be applied
// is unpublished again, so that the retry does it all over, unless it
// was published before (a republish): its pod's containers use it.
func (d *Drivers) publish(ctx context.Context, c *nodeClient, pod *v1.Pod, vol Volume, req *csipb.NodePublishVolumeRequest, policy storagev1.FSGroupPolicy) error {
	vc, err := mountGroupCapability(ctx, c, vol, pod)
	if err != nil {
		return err
	}
	req.VolumeCapability = vc
	republish := mountinfo.IsMountPoint(req.TargetPath)
	if err := c.publish(ctx, req); err != nil {
		return err
	}
	gid, change := podFSGroup(pod)
	if vc.GetMount().GetVolumeMountGroup() != "" || !skiffAppliesFSGroup(vol, gid, policy) {
		return nil
	}
	err = d.applyFSGroup(ctx, req.TargetPath, fsgroup.Options{GID: *gid, ReadOnly: vol.ReadOnly, Policy: change})
	if err == nil {
		klog.V(4).InfoS("Applied fsGroup to a CSI volume", "pod", klog.KObj(pod), "volume", vol.SpecName, "gid", *gid)
		return nil
	}
	err = fmt.Errorf("applyFSGroup failed for vol %s: %w", vol.Handle, err)
	if republish {
		return err
	}
	if uerr := c.unpublish(ctx, req.VolumeId, req.TargetPath); uerr != nil {
		klog.ErrorS(uerr, "Cannot unpublish a volume whose fsGroup failed", "volume", vol.SpecName)
	}
	return err
}

// skiffAppliesFSGroup is upstream's supportsFSGroup: whether the kubelet
// gives the volume the pod's fsGroup under the driver's policy.
func skiffAppliesFSGroup(vol Volume, gid *int64, policy storagev1.FSGroupPolicy) bool {
	switch {
	case gid == nil || policy == storagev1.NoneFSGroupPolicy || vol.ReadOnly:
		return false
	case policy == storagev1.FileFSGroupPolicy:
		return true
	case vol.FSType == "":
		klog.V(4).InfoS("Skipping fsGroup: the CSI volume has no fsType", "volume", vol.SpecName)
		return false
	case vol.Inline: // always mounted ReadWriteOnce
		return true
	}
	return slices.Contains(vol.AccessModes, v1.ReadWriteOnce) || slices.Contains(vol.AccessModes, v1.ReadWriteOncePod)
}

// applyFSGroup gives the published volume at target the group, walking
// it from a held fd of target opened below the root directory.
func (d *Drivers) applyFSGroup(ctx context.Context, target string, o fsgroup.Options) error {
	fd, err := d.root().open(target, false)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return fsgroup.Apply(ctx, fd, o)
}
