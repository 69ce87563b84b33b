package csi

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/volume/mountinfo"
)

// TearDownPod unpublishes every CSI volume of the pod directory podDir,
// found from its vol_data.json files (so a pod deleted while Skiff was
// down is torn down too), and unstages each volume no other pod under
// the root directory still uses. Every volume is tried; the joined error
// asks for a retry.
func (d *Drivers) TearDownPod(ctx context.Context, podDir string) error {
	// What the pod wanted stays in use only while it is on disk; the
	// Node's status says so at once when that changed.
	wanted := d.use.forget(podDir)
	vols, err := d.root().publishedVolumes(podDir)
	if err != nil {
		return fmt.Errorf("CSI volumes of %s: %w", podDir, err)
	}
	errs := []error{d.tearDownBlocks(ctx, podDir)}
	for spec, v := range vols {
		if err := d.tearDown(ctx, podDir, spec, v); err != nil {
			errs = append(errs, fmt.Errorf("CSI volume %s: %w", spec, err))
		}
	}
	if (wanted || len(vols) > 0) && d.cfg.InUseChanged != nil {
		d.cfg.InUseChanged()
	}
	return errors.Join(errs...)
}

func (d *Drivers) tearDown(ctx context.Context, podDir, spec string, v volData) error {
	c, err := d.client(v.DriverName)
	if err != nil {
		return err
	}
	defer c.Close()
	defer d.lock(v.DriverName, v.VolumeHandle)()
	dir := filepath.Join(podVolumesDir(podDir), spec)
	target := filepath.Join(dir, publishTarget)
	if err := c.unpublish(ctx, v.VolumeHandle, target); err != nil {
		return err
	}
	if mountinfo.IsMountPoint(target) {
		return fmt.Errorf("%s: %w", target, errStillMounted)
	}
	klog.V(2).InfoS("Unpublished CSI volume", "driver", v.DriverName, "volume", spec, "target", target)
	// The volume directory, with its vol_data.json, goes only after the
	// unstage: an unstage that fails is retried with the pod's teardown
	// (unpublishing again is a no-op for the driver), not forgotten.
	if v.VolumeLifecycleMode != "Ephemeral" {
		if err := d.unstageUnused(ctx, c, v, podDir); err != nil {
			return err
		}
	}
	return d.root().removeVolumeDir(dir, publishTarget)
}

// unstageUnused unstages the volume if it is staged and no pod under the
// root directory other than exceptPod has it published.
func (d *Drivers) unstageUnused(ctx context.Context, c *nodeClient, v volData, exceptPod string) error {
	staging := d.stagingPath(v.DriverName, v.VolumeHandle)
	if _, ok, err := d.root().readVolData(filepath.Dir(staging)); !ok || err != nil {
		return err
	}
	used, err := d.publishedElsewhere(v, exceptPod)
	if err != nil || used {
		return err
	}
	stages, err := c.stagesVolumes(ctx)
	if err != nil {
		return err
	}
	if stages {
		if err := c.unstage(ctx, v.VolumeHandle, staging); err != nil {
			return err
		}
	}
	d.markStaged(v.DriverName, v.VolumeHandle, false)
	if mountinfo.IsMountPoint(staging) {
		return fmt.Errorf("%s still mounted after NodeUnstageVolume", staging)
	}
	if err := d.root().removeVolumeDir(filepath.Dir(staging), globalMount); err != nil {
		return fmt.Errorf("remove staging directory: %w", err)
	}
	klog.V(2).InfoS("Unstaged CSI volume", "driver", v.DriverName, "handle", v.VolumeHandle)
	return nil
}

// publishedElsewhere tells whether a pod other than exceptPod has the
// volume published.
func (d *Drivers) publishedElsewhere(v volData, exceptPod string) (bool, error) {
	pods, err := d.root().readDir(filepath.Join(d.cfg.RootDir, "pods"))
	if err != nil {
		return false, err
	}
	for _, p := range pods {
		podDir := filepath.Join(d.cfg.RootDir, "pods", p.Name())
		if !p.IsDir() || podDir == filepath.Clean(exceptPod) {
			continue
		}
		vols, err := d.root().publishedVolumes(podDir)
		if err != nil {
			return false, err
		}
		for _, o := range vols {
			if o.DriverName == v.DriverName && o.VolumeHandle == v.VolumeHandle {
				return true, nil
			}
		}
	}
	return false, nil
}
