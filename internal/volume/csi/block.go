package csi

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/volume/mountinfo"
)

// Raw block volumes (a claim of volumeMode Block) follow upstream's block
// mapper and its layout:
//
//	<root>/plugins/kubernetes.io/csi/volumeDevices/staging/<spec>           NodeStageVolume target (a directory)
//	<root>/plugins/kubernetes.io/csi/volumeDevices/publish/<spec>/<podUID>  NodePublishVolume target (a file the driver makes a device)
//	<root>/plugins/kubernetes.io/csi/volumeDevices/<spec>/data/vol_data.json
//	<root>/pods/<uid>/volumeDevices/kubernetes.io~csi/<spec>                symlink to the publish target
//
// The publish target is what the container gets, as a CRI device at its
// volumeDevices' devicePath. The pod's symlink is never followed: Skiff
// keeps it, as upstream, to know after a restart which block volumes a
// pod has; teardown lists the names. Upstream also bind-mounts the device
// under .../volumeDevices/<spec>/dev/<podUID> and holds it with a loop
// device, so that a disk the kernel removes cannot be replaced under the
// same name while the pod runs; Skiff does not (see docs/features.md).
const (
	volumeDevicesDir = "volumeDevices"
	blockDataDir     = "data"
)

// blockDir is <root>/plugins/kubernetes.io/csi/volumeDevices.
func (d *Drivers) blockDir() string {
	return filepath.Join(d.cfg.RootDir, "plugins", "kubernetes.io", "csi", volumeDevicesDir)
}

func (d *Drivers) blockStagingPath(spec string) string {
	return filepath.Join(d.blockDir(), "staging", spec)
}

func (d *Drivers) blockPublishPath(spec, podUID string) string {
	return filepath.Join(d.blockDir(), "publish", spec, podUID)
}

func (d *Drivers) blockDataPath(spec string) string {
	return filepath.Join(d.blockDir(), spec, blockDataDir)
}

// podDevicesDir holds a pod's symlinks to its CSI block volumes.
func podDevicesDir(podDir string) string {
	return filepath.Join(podDir, volumeDevicesDir, podPluginDir)
}

// blockCapability is the volume's capability with the block access type,
// its access mode as the driver's node capabilities map it.
func blockCapability(vol Volume, multiWriter bool) *csipb.VolumeCapability {
	c := capability(vol, multiWriter)
	c.AccessType = &csipb.VolumeCapability_Block{Block: &csipb.VolumeCapability_BlockVolume{}}
	return c
}

// askBlockCapability asks the driver for SINGLE_NODE_MULTI_WRITER right
// before a stage or publish, as upstream's block mapper does, and
// returns the block capability it maps to.
func askBlockCapability(ctx context.Context, c *nodeClient, vol Volume) (*csipb.VolumeCapability, error) {
	multiWriter, err := c.hasCapability(ctx, csipb.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER)
	if err != nil {
		return nil, err
	}
	return blockCapability(vol, multiWriter), nil
}

// setUpBlock stages (if the driver stages) and publishes a block volume
// for the pod and returns the device's path on the host, which is a
// block device reached without following any symlink.
func (d *Drivers) setUpBlock(ctx context.Context, c *nodeClient, pod *v1.Pod, podDir string, vol Volume, podInfo bool) (string, error) {
	uid := filepath.Base(podDir)
	publish := d.blockPublishPath(vol.SpecName, uid)
	if err := d.root().writeVolData(d.blockDataPath(vol.SpecName), volData{SpecVolID: vol.SpecName, VolumeHandle: vol.Handle,
		DriverName: vol.Driver, NodeName: d.cfg.NodeName}); err != nil {
		return "", err
	}
	// Recorded before the driver is called, so that the pod's teardown
	// undoes whatever part of this the driver did.
	if err := d.root().symlinkAt(podDevicesDir(podDir), vol.SpecName, publish); err != nil {
		return "", err
	}
	stages, err := c.stagesVolumes(ctx)
	if err != nil {
		return "", err
	}
	staging := ""
	if stages {
		staging = d.blockStagingPath(vol.SpecName)
		if err := d.stageBlock(ctx, c, vol, staging, uid); err != nil {
			return "", err
		}
	}
	// The driver makes the target itself; its directory is Skiff's.
	if err := d.root().mkdirAll(filepath.Dir(publish)); err != nil {
		return "", fmt.Errorf("create publish directory: %w", err)
	}
	vc, err := askBlockCapability(ctx, c, vol)
	if err != nil {
		return "", err
	}
	if err := c.publish(ctx, &csipb.NodePublishVolumeRequest{VolumeId: vol.Handle, StagingTargetPath: staging, TargetPath: publish,
		Readonly: vol.ReadOnly, VolumeCapability: vc, Secrets: vol.PublishSecrets, PublishContext: vol.publishContext,
		VolumeContext: volumeContext(vol, pod, podInfo, storagev1.VolumeLifecyclePersistent)}); err != nil {
		return "", err
	}
	if err := d.root().isBlockDevice(publish); err != nil {
		return "", fmt.Errorf("after NodePublishVolume: %w", err)
	}
	klog.V(2).InfoS("Published CSI block volume", "pod", klog.KObj(pod), "driver", vol.Driver, "volume", vol.SpecName, "device", publish)
	return publish, nil
}

// stageBlock stages the block volume unless a pod other than podUID has
// it published already (then it is staged: once per node, as upstream).
func (d *Drivers) stageBlock(ctx context.Context, c *nodeClient, vol Volume, staging, podUID string) error {
	pubs, err := d.root().readDir(filepath.Dir(d.blockPublishPath(vol.SpecName, podUID)))
	if err != nil {
		return err
	}
	for _, p := range pubs {
		if p.Name() != podUID {
			return nil
		}
	}
	if err := d.root().mkdirAll(staging); err != nil {
		return fmt.Errorf("create staging path: %w", err)
	}
	vc, err := askBlockCapability(ctx, c, vol)
	if err != nil {
		return err
	}
	return c.stage(ctx, &csipb.NodeStageVolumeRequest{VolumeId: vol.Handle, StagingTargetPath: staging,
		VolumeCapability: vc, Secrets: vol.StageSecrets, PublishContext: vol.publishContext, VolumeContext: vol.Attributes})
}

// mappedBlock tells whether the pod's block volume is published and
// recorded already (by this Skiff or before a restart), so that the
// driver need not be asked.
func (d *Drivers) mappedBlock(podDir string, vol Volume) (string, bool) {
	publish := d.blockPublishPath(vol.SpecName, filepath.Base(podDir))
	v, ok, _ := d.root().readVolData(d.blockDataPath(vol.SpecName))
	if !ok || v.DriverName != vol.Driver || v.VolumeHandle != vol.Handle {
		return "", false
	}
	if _, err := d.root().lstatAt(podDevicesDir(podDir), vol.SpecName); err != nil {
		return "", false
	}
	return publish, d.root().isBlockDevice(publish) == nil
}

// tearDownBlocks unpublishes every block volume of the pod directory,
// found from its symlinks, and unstages each one no other pod has
// published. Every volume is tried.
func (d *Drivers) tearDownBlocks(ctx context.Context, podDir string) error {
	entries, err := d.root().readDir(podDevicesDir(podDir))
	if err != nil {
		return fmt.Errorf("CSI block volumes of %s: %w", podDir, err)
	}
	var errs []error
	for _, e := range entries {
		if err := d.tearDownBlock(ctx, podDir, e.Name()); err != nil {
			errs = append(errs, fmt.Errorf("CSI block volume %s: %w", e.Name(), err))
		}
	}
	return errors.Join(errs...)
}

func (d *Drivers) tearDownBlock(ctx context.Context, podDir, spec string) error {
	uid := filepath.Base(podDir)
	v, ok, err := d.root().readVolData(d.blockDataPath(spec))
	if err != nil {
		return err
	}
	if !ok { // not recorded: the driver was never asked
		klog.InfoS("A pod's CSI block volume has no vol_data.json, forgetting it", "podDir", podDir, "volume", spec)
		return d.root().removeAt(podDevicesDir(podDir), spec, false)
	}
	c, err := d.client(v.DriverName)
	if err != nil {
		return err
	}
	defer c.Close()
	defer d.lock(v.DriverName, v.VolumeHandle)()
	publish := d.blockPublishPath(spec, uid)
	// Called even when the target is gone: an earlier publish may have
	// timed out in the driver, which must finish or undo it.
	if err := c.unpublish(ctx, v.VolumeHandle, publish); err != nil {
		return err
	}
	if mountinfo.IsMountPoint(publish) {
		return fmt.Errorf("%s: %w", publish, errStillMounted)
	}
	if err := d.root().removeAt(filepath.Dir(publish), uid, false); err != nil {
		return err
	}
	klog.V(2).InfoS("Unpublished CSI block volume", "driver", v.DriverName, "volume", spec, "target", publish)
	if err := d.unstageBlockUnused(ctx, c, spec, v); err != nil {
		return err
	}
	return d.root().removeAt(podDevicesDir(podDir), spec, false)
}

// unstageBlockUnused unstages the block volume once no pod has it
// published, and removes its directories.
func (d *Drivers) unstageBlockUnused(ctx context.Context, c *nodeClient, spec string, v volData) error {
	pubDir := filepath.Dir(d.blockPublishPath(spec, "x"))
	if others, err := d.root().readDir(pubDir); err != nil || len(others) > 0 {
		return err
	}
	staging := d.blockStagingPath(spec)
	if _, err := d.root().lstatAt(filepath.Dir(staging), spec); err == nil {
		stages, err := c.stagesVolumes(ctx)
		if err != nil {
			return err
		}
		if stages {
			if err := c.unstage(ctx, v.VolumeHandle, staging); err != nil {
				return err
			}
		}
		if mountinfo.IsMountPoint(staging) {
			return fmt.Errorf("%s still mounted after NodeUnstageVolume", staging)
		}
		if err := d.root().removeAt(filepath.Dir(staging), spec, true); err != nil {
			return fmt.Errorf("remove staging directory: %w", err)
		}
	}
	data := d.blockDataPath(spec)
	errs := []error{
		d.root().removeAt(filepath.Dir(pubDir), spec, true),
		d.root().removeAt(data, volDataFile, false),
		d.root().removeAt(filepath.Dir(data), blockDataDir, true),
		d.root().removeAt(d.blockDir(), spec, true),
	}
	klog.V(2).InfoS("Unstaged CSI block volume", "driver", v.DriverName, "handle", v.VolumeHandle)
	return errors.Join(errs...)
}

// isBlockDevice checks that path, below the root, is a block device,
// reached without following a symlink.
func (r rootDir) isBlockDevice(path string) error {
	st, err := r.lstatAt(filepath.Dir(path), filepath.Base(path))
	if err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return fmt.Errorf("%s is not a block device (mode %#o)", path, st.Mode&unix.S_IFMT)
	}
	return nil
}

// lstatAt stats name in the directory dir below the root, not following
// it if it is a symlink.
func (r rootDir) lstatAt(dir, name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := r.open(dir, false)
	if err != nil {
		return st, err
	}
	defer unix.Close(fd)
	if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return st, fmt.Errorf("stat %s: %w", filepath.Join(dir, name), err)
	}
	return st, nil
}

// symlinkAt makes name in the directory dir below the root (made if
// missing) a symlink to target, replacing a symlink of that name.
func (r rootDir) symlinkAt(dir, name, target string) error {
	if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
		return fmt.Errorf("%q is not one path element", name)
	}
	fd, err := r.open(dir, true)
	if err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
		if err := unix.Unlinkat(fd, name, 0); err != nil {
			return fmt.Errorf("replace %s: %w", filepath.Join(dir, name), err)
		}
	}
	if err := unix.Symlinkat(target, fd, name); err != nil {
		return fmt.Errorf("symlink %s: %w", filepath.Join(dir, name), err)
	}
	return nil
}
