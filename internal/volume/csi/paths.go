package csi

import (
	"crypto/sha256"
	"fmt"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"
)

// Upstream's layout, which drivers and tools rely on:
//
//	<root>/plugins/kubernetes.io/csi/<driver>/<sha256(volumeHandle)>/globalmount   staging target
//	<root>/plugins/kubernetes.io/csi/<driver>/<sha256(volumeHandle)>/vol_data.json
//	<root>/pods/<uid>/volumes/kubernetes.io~csi/<spec name>/mount                   publish target
//	<root>/pods/<uid>/volumes/kubernetes.io~csi/<spec name>/vol_data.json
//
// The driver name was validated at registration and the handle is
// hashed, so neither can lead out of these directories.
const (
	podPluginDir  = "kubernetes.io~csi"
	volDataFile   = "vol_data.json"
	globalMount   = "globalmount"
	publishTarget = "mount"
)

// stagingPath is the volume's staging target path.
func (d *Drivers) stagingPath(driver, handle string) string {
	return filepath.Join(d.cfg.RootDir, "plugins", "kubernetes.io", "csi", driver, fmt.Sprintf("%x", sha256.Sum256([]byte(handle))), globalMount)
}

// podVolumesDir holds a pod's CSI volumes.
func podVolumesDir(podDir string) string { return filepath.Join(podDir, "volumes", podPluginDir) }

// inlineHandle is the volume handle of an inline ephemeral volume, as
// upstream makes it: unique per pod and volume.
func inlineHandle(podUID types.UID, volume string) string {
	return fmt.Sprintf("csi-%x", sha256.Sum256([]byte(string(podUID)+volume)))
}

// volData is what vol_data.json records: enough to unpublish and unstage
// the volume without its pod or PV, after a restart of Skiff. The keys are
// upstream's.
type volData struct {
	SpecVolID           string `json:"specVolID,omitempty"`
	VolumeHandle        string `json:"volumeHandle"`
	DriverName          string `json:"driverName"`
	NodeName            string `json:"nodeName,omitempty"`
	VolumeLifecycleMode string `json:"volumeLifecycleMode,omitempty"`
}

// publishedVolumes lists a pod's CSI volume directories that hold a
// vol_data.json, by spec name.
func (r rootDir) publishedVolumes(podDir string) (map[string]volData, error) {
	entries, err := r.readDir(podVolumesDir(podDir))
	if err != nil {
		return nil, err
	}
	out := map[string]volData{}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		v, ok, err := r.readVolData(filepath.Join(podVolumesDir(podDir), e.Name()))
		if err != nil {
			return nil, err
		}
		if ok {
			out[e.Name()] = v
		}
	}
	return out, nil
}
