package csi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/volume/mountinfo"
)

// Volume is one CSI volume of a pod, resolved from an inline csi volume
// or a PV's csi source.
type Volume struct {
	// SpecName names the volume's directory in the pod: the PV's name,
	// or the pod's volume name for an inline volume.
	SpecName string
	Driver   string
	// Handle is the PV's volumeHandle; empty for an inline volume,
	// which gets upstream's handle for it.
	Handle       string
	Inline       bool
	ReadOnly     bool
	FSType       string
	MountOptions []string
	AccessMode   v1.PersistentVolumeAccessMode
	// AccessModes are all of the PV's; they decide whether Skiff
	// applies the pod's fsGroup under ReadWriteOnceWithFSType.
	AccessModes                  []v1.PersistentVolumeAccessMode
	Attributes                   map[string]string
	StageSecrets, PublishSecrets map[string]string
	ExpandSecrets                map[string]string // the PV's nodeExpandSecretRef, for Expand
	// Block is a raw block volume (volumeMode Block): SetUp returns the
	// device's path on the host.
	Block bool

	// publishContext is the VolumeAttachment's attachmentMetadata, for
	// a volume needing attachment; set by SetUp.
	publishContext map[string]string
}

// SetUp stages the volume if the driver stages volumes and nobody staged
// it yet, publishes it for the pod and returns the publish target, in
// upstream's order (NodeGetCapabilities before staging and again before
// publishing) and with its paths and volume context. vol_data.json
// is written first, so a restarted Skiff can undo what a crash left.
func (d *Drivers) SetUp(ctx context.Context, pod *v1.Pod, podDir string, vol Volume) (string, error) {
	// Pods from files and URLs reach here unvalidated.
	if err := validDriverName(vol.Driver); err != nil {
		return "", fmt.Errorf("refused: %w", err)
	}
	if path, ok := d.setUpBefore(ctx, podDir, vol); ok {
		return path, nil
	}
	dir := filepath.Join(podVolumesDir(podDir), vol.SpecName)
	target := filepath.Join(dir, publishTarget)
	c, err := d.client(vol.Driver)
	if err != nil {
		return "", err
	}
	defer c.Close()
	policy, err := d.policy(ctx, vol.Driver)
	if err != nil {
		return "", err
	}
	mode := storagev1.VolumeLifecyclePersistent
	if vol.Inline {
		mode = storagev1.VolumeLifecycleEphemeral
		vol.Handle = inlineHandle(pod.UID, vol.SpecName)
	}
	if !slices.Contains(policy.modes, mode) {
		return "", fmt.Errorf("volume mode %q not supported by driver %s (only supports %q)", mode, vol.Driver, policy.modes)
	}
	d.use.noteDriver(vol.Driver, policy.attachRequired)
	if policy.attachRequired && !vol.Inline {
		if vol.publishContext, err = d.waitForAttach(ctx, podDir, vol); err != nil {
			return "", err
		}
	}
	defer d.lock(vol.Driver, vol.Handle)()
	if vol.Block && !vol.Inline {
		return d.setUpBlock(ctx, c, pod, podDir, vol, policy.podInfoOnMount)
	}
	staging := ""
	if !vol.Inline {
		if err := d.stage(ctx, c, vol, pod); err != nil {
			return "", err
		}
		// Asked again before publishing, as upstream does.
		if stages, err := c.stagesVolumes(ctx); err != nil {
			return "", err
		} else if stages {
			staging = d.stagingPath(vol.Driver, vol.Handle)
		}
	}
	volCtx, err := d.withTokens(ctx, pod, policy.tokenRequests, volumeContext(vol, pod, policy.podInfoOnMount, mode))
	if err != nil {
		return "", err
	}
	if err := d.root().writeVolData(dir, volData{SpecVolID: vol.SpecName, VolumeHandle: vol.Handle, DriverName: vol.Driver,
		NodeName: d.cfg.NodeName, VolumeLifecycleMode: string(mode)}); err != nil {
		return "", err
	}
	// The volume capability is publish's to make.
	req := &csipb.NodePublishVolumeRequest{
		VolumeId: vol.Handle, StagingTargetPath: staging, TargetPath: target, Readonly: vol.ReadOnly,
		Secrets: vol.PublishSecrets, PublishContext: vol.publishContext, VolumeContext: volCtx,
	}
	if err := d.publish(ctx, c, pod, vol, req, policy.fsGroupPolicy); err != nil {
		if !mountinfo.IsMountPoint(target) { // never remove through a mount
			if rerr := d.root().removeVolumeDir(dir, publishTarget); rerr != nil {
				klog.ErrorS(rerr, "Cannot remove a volume directory after a failed publish", "dir", dir)
			}
		}
		return "", err
	}
	klog.V(2).InfoS("Published CSI volume", "pod", klog.KObj(pod), "driver", vol.Driver, "volume", vol.SpecName, "target", target)
	return target, nil
}

// stage stages the volume once per node, if the driver stages volumes.
// A volume this process staged is not staged again, and the driver is
// not asked, as upstream skips a device it knows mounted (staged.go).
func (d *Drivers) stage(ctx context.Context, c *nodeClient, vol Volume, pod *v1.Pod) error {
	staging := d.stagingPath(vol.Driver, vol.Handle)
	if d.isStaged(vol.Driver, vol.Handle) {
		return nil
	}
	stages, err := c.stagesVolumes(ctx)
	if err != nil || !stages {
		return err
	}
	if err := d.root().mkdirAll(staging); err != nil {
		return fmt.Errorf("create staging path: %w", err)
	}
	if err := d.root().writeVolData(filepath.Dir(staging), volData{VolumeHandle: vol.Handle, DriverName: vol.Driver}); err != nil {
		return err
	}
	volCap, err := mountGroupCapability(ctx, c, vol, pod)
	if err != nil {
		return err
	}
	err = c.stage(ctx, &csipb.NodeStageVolumeRequest{
		VolumeId: vol.Handle, StagingTargetPath: staging, VolumeCapability: volCap,
		Secrets: vol.StageSecrets, VolumeContext: vol.Attributes, PublishContext: vol.publishContext,
	})
	if err != nil {
		if rerr := d.root().removeAt(filepath.Dir(staging), volDataFile, false); rerr != nil {
			klog.ErrorS(rerr, "Cannot remove vol_data.json after a failed stage", "path", staging)
		}
		return err
	}
	d.markStaged(vol.Driver, vol.Handle, true)
	klog.V(2).InfoS("Staged CSI volume", "driver", vol.Driver, "handle", vol.Handle, "path", staging)
	return nil
}

// driverPolicy is what a CSIDriver object says of mounting its volumes.
type driverPolicy struct {
	attachRequired, podInfoOnMount bool
	fsGroupPolicy                  storagev1.FSGroupPolicy
	modes                          []storagev1.VolumeLifecycleMode
	tokenRequests                  []storagev1.TokenRequest
	requiresRepublish              bool
}

// policy reads the driver's CSIDriver; without one, upstream's defaults:
// attachment required, no pod info, persistent volumes only.
func (d *Drivers) policy(ctx context.Context, name string) (driverPolicy, error) {
	p := driverPolicy{attachRequired: true, modes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent},
		fsGroupPolicy: storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy}
	if d.cfg.CSIDrivers == nil {
		return p, nil
	}
	obj, err := d.cfg.CSIDrivers.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return p, nil
	}
	if err != nil {
		return p, fmt.Errorf("get CSIDriver %s: %w", name, err)
	}
	p.attachRequired = ptr.Deref(obj.Spec.AttachRequired, true)
	p.podInfoOnMount = ptr.Deref(obj.Spec.PodInfoOnMount, false)
	if fp := ptr.Deref(obj.Spec.FSGroupPolicy, ""); fp != "" {
		p.fsGroupPolicy = fp
	}
	p.tokenRequests = obj.Spec.TokenRequests
	p.requiresRepublish = ptr.Deref(obj.Spec.RequiresRepublish, false)
	if len(obj.Spec.VolumeLifecycleModes) > 0 {
		p.modes = obj.Spec.VolumeLifecycleModes
	}
	return p, nil
}

// volumeContext is the volume's attributes plus, when the CSIDriver asks
// for it, upstream's pod information keys.
func volumeContext(vol Volume, pod *v1.Pod, podInfo bool, mode storagev1.VolumeLifecycleMode) map[string]string {
	ctx := maps.Clone(vol.Attributes)
	if !podInfo {
		return ctx
	}
	if ctx == nil {
		ctx = map[string]string{}
	}
	ctx["csi.storage.k8s.io/pod.name"] = pod.Name
	ctx["csi.storage.k8s.io/pod.namespace"] = pod.Namespace
	ctx["csi.storage.k8s.io/pod.uid"] = string(pod.UID)
	ctx["csi.storage.k8s.io/serviceAccount.name"] = pod.Spec.ServiceAccountName
	ctx["csi.storage.k8s.io/ephemeral"] = strconv.FormatBool(mode == storagev1.VolumeLifecycleEphemeral)
	return ctx
}

// setUpBefore returns the volume's path if it was set up for the pod
// before (or before Skiff restarted): the driver need not be asked, nor
// even be registered yet, unless it wants every sync to publish again.
func (d *Drivers) setUpBefore(ctx context.Context, podDir string, vol Volume) (string, bool) {
	if vol.Block && !vol.Inline {
		return d.mappedBlock(podDir, vol)
	}
	dir := filepath.Join(podVolumesDir(podDir), vol.SpecName)
	target := filepath.Join(dir, publishTarget)
	v, ok, _ := d.root().readVolData(dir)
	if ok && v.DriverName == vol.Driver && mountinfo.IsMountPoint(target) && !d.republishNow(ctx, vol.Driver) {
		return target, true
	}
	return "", false
}

// capability is a mount volume capability with the PV's access mode as
// upstream maps it: ReadWriteOnce is SINGLE_NODE_MULTI_WRITER and
// ReadWriteOncePod SINGLE_NODE_SINGLE_WRITER for a driver with the
// SINGLE_NODE_MULTI_WRITER node capability (multiWriter), both
// SINGLE_NODE_WRITER for one without.
func capability(vol Volume, multiWriter bool) *csipb.VolumeCapability {
	mode := csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	switch vol.AccessMode {
	case v1.ReadOnlyMany:
		mode = csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
	case v1.ReadWriteMany:
		mode = csipb.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
	case v1.ReadWriteOncePod:
		if multiWriter {
			mode = csipb.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER
		}
	case v1.ReadWriteOnce:
		if multiWriter {
			mode = csipb.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER
		}
	}
	return &csipb.VolumeCapability{
		AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{FsType: vol.FSType, MountFlags: vol.MountOptions}},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: mode},
	}
}

var errStillMounted = errors.New("still mounted after NodeUnpublishVolume")
