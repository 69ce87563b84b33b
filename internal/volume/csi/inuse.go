package csi

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/klog/v2"
)

// volumeUse is what the Node's volumesInUse is made of, as upstream
// makes it: every volume needing attachment that a pod wants (from the
// first setup attempt until the pod is torn down), and every one staged
// or published on disk (until it is unstaged and its directories are
// gone). So the attach/detach controller never detaches a volume that is
// mounted, or about to be.
type volumeUse struct {
	mu sync.Mutex
	// wanted holds, by pod directory and spec name, the volumes that
	// pods want and that need attachment.
	wanted map[string]map[string]v1.UniqueVolumeName
	// attachable is, by driver, whether its volumes need attachment, as
	// its CSIDriver said when last read.
	attachable map[string]bool
}

// want records that the pod wants the volume; true if no pod wanted it
// before.
func (u *volumeUse) want(podDir, spec string, name v1.UniqueVolumeName) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	isNew := true
	for _, vols := range u.wanted {
		for _, n := range vols {
			isNew = isNew && n != name
		}
	}
	if u.wanted == nil {
		u.wanted = map[string]map[string]v1.UniqueVolumeName{}
	}
	dir := filepath.Clean(podDir)
	if u.wanted[dir] == nil {
		u.wanted[dir] = map[string]v1.UniqueVolumeName{}
	}
	u.wanted[dir][spec] = name
	return isNew
}

// forget drops what the pod wants; true if it wanted a volume needing
// attachment.
func (u *volumeUse) forget(podDir string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	_, ok := u.wanted[filepath.Clean(podDir)]
	delete(u.wanted, filepath.Clean(podDir))
	return ok
}

// noteDriver records whether the driver's volumes need attachment.
func (u *volumeUse) noteDriver(driver string, attachable bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.attachable == nil {
		u.attachable = map[string]bool{}
	}
	u.attachable[driver] = attachable
}

// snapshot copies the wanted volumes and what is known of the drivers.
func (u *volumeUse) snapshot() (wanted []v1.UniqueVolumeName, attachable map[string]bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, vols := range u.wanted {
		for _, n := range vols {
			wanted = append(wanted, n)
		}
	}
	attachable = make(map[string]bool, len(u.attachable))
	for k, v := range u.attachable {
		attachable[k] = v
	}
	return wanted, attachable
}

// VolumesInUse is the Node's volumesInUse: the volumes needing
// attachment that pods want, or that are staged or published under the
// root directory, sorted. A driver whose CSIDriver cannot be read counts
// as needing attachment: reporting a volume in use that needs none
// costs nothing, missing one could have it detached while mounted.
func (d *Drivers) VolumesInUse(ctx context.Context) []v1.UniqueVolumeName {
	wanted, attachable := d.use.snapshot()
	set := map[v1.UniqueVolumeName]bool{}
	for _, n := range wanted {
		set[n] = true
	}
	onDisk, err := d.volumesOnDisk()
	if err != nil {
		klog.ErrorS(err, "Cannot list the CSI volumes on disk; volumesInUse has those known in memory only")
	}
	for _, v := range onDisk {
		a, known := attachable[v.DriverName]
		if !known {
			p, err := d.policy(ctx, v.DriverName)
			a = err != nil || p.attachRequired
			if err == nil {
				d.use.noteDriver(v.DriverName, a)
				attachable[v.DriverName] = a
			}
		}
		if a {
			set[UniqueVolumeName(v.DriverName, v.VolumeHandle)] = true
		}
	}
	if len(set) == 0 {
		return nil
	}
	out := make([]v1.UniqueVolumeName, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// volumesOnDisk lists the persistent CSI volumes that are staged, or
// published in a pod, under the root directory, read from their
// vol_data.json files (as a restarted Skiff finds them). What cannot be
// read (a symlink planted by a driver) is skipped and named in the
// error.
func (d *Drivers) volumesOnDisk() ([]volData, error) {
	staged, serr := d.stagedOnDisk()
	published, perr := d.publishedOnDisk()
	return append(staged, published...), errors.Join(serr, perr)
}

// stagedOnDisk reads <root>/plugins/kubernetes.io/csi/<driver>/<volume>/vol_data.json.
func (d *Drivers) stagedOnDisk() ([]volData, error) {
	r := d.root()
	csiDir := filepath.Join(string(r), "plugins", "kubernetes.io", "csi")
	drivers, err := r.readDir(csiDir)
	if err != nil {
		return nil, err
	}
	var out []volData
	var errs []error
	for _, drv := range drivers {
		if !drv.IsDir() {
			continue
		}
		vols, err := r.readDir(filepath.Join(csiDir, drv.Name()))
		errs = append(errs, err)
		for _, vol := range vols {
			if !vol.IsDir() {
				continue
			}
			v, ok, err := r.readVolData(filepath.Join(csiDir, drv.Name(), vol.Name()))
			errs = append(errs, err)
			if ok {
				out = append(out, v)
			}
		}
	}
	return out, errors.Join(errs...)
}

// publishedOnDisk reads the vol_data.json of every pod's persistent CSI
// volumes.
func (d *Drivers) publishedOnDisk() ([]volData, error) {
	r := d.root()
	podsDir := filepath.Join(string(r), "pods")
	pods, err := r.readDir(podsDir)
	if err != nil {
		return nil, err
	}
	var out []volData
	var errs []error
	for _, p := range pods {
		if !p.IsDir() {
			continue
		}
		vols, err := r.publishedVolumes(filepath.Join(podsDir, p.Name()))
		errs = append(errs, err)
		for _, v := range vols {
			if v.VolumeLifecycleMode != string(storagev1.VolumeLifecycleEphemeral) {
				out = append(out, v)
			}
		}
	}
	return out, errors.Join(errs...)
}
