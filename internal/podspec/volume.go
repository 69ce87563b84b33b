package podspec

import (
	"reflect"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// setVolumeSources returns the JSON names of the sources a volume sets.
// Reflection keeps this correct when the API grows a new volume type.
func setVolumeSources(vs *v1.VolumeSource) []string {
	var names []string
	v := reflect.ValueOf(vs).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if f.Kind() != reflect.Pointer || f.IsNil() {
			continue
		}
		name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		names = append(names, name)
	}
	return names
}

func defaultVolume(vol *v1.Volume) {
	vs := &vol.VolumeSource
	if len(setVolumeSources(vs)) == 0 {
		vs.EmptyDir = &v1.EmptyDirVolumeSource{}
	}
	if vs.HostPath != nil && vs.HostPath.Type == nil {
		vs.HostPath.Type = ptr(v1.HostPathUnset)
	}
	if vs.Secret != nil && vs.Secret.DefaultMode == nil {
		vs.Secret.DefaultMode = ptr(v1.SecretVolumeSourceDefaultMode)
	}
	if vs.ConfigMap != nil && vs.ConfigMap.DefaultMode == nil {
		vs.ConfigMap.DefaultMode = ptr(v1.ConfigMapVolumeSourceDefaultMode)
	}
	if vs.DownwardAPI != nil {
		if vs.DownwardAPI.DefaultMode == nil {
			vs.DownwardAPI.DefaultMode = ptr(v1.DownwardAPIVolumeSourceDefaultMode)
		}
		defaultDownwardAPIItems(vs.DownwardAPI.Items)
	}
	if vs.Projected != nil {
		defaultProjected(vs.Projected)
	}
	if vs.Image != nil && vs.Image.PullPolicy == "" {
		vs.Image.PullPolicy = defaultPullPolicy(vs.Image.Reference)
	}
	if e := vs.Ephemeral; e != nil && e.VolumeClaimTemplate != nil {
		spec := &e.VolumeClaimTemplate.Spec
		if spec.VolumeMode == nil {
			spec.VolumeMode = ptr(v1.PersistentVolumeFilesystem)
		}
		roundUpResources(spec.Resources.Limits)
		roundUpResources(spec.Resources.Requests)
	}
	defaultLegacyVolume(vs)
}

func defaultProjected(p *v1.ProjectedVolumeSource) {
	if p.DefaultMode == nil {
		p.DefaultMode = ptr(v1.ProjectedVolumeSourceDefaultMode)
	}
	for i := range p.Sources {
		s := &p.Sources[i]
		if s.DownwardAPI != nil {
			defaultDownwardAPIItems(s.DownwardAPI.Items)
		}
		if s.ServiceAccountToken != nil && s.ServiceAccountToken.ExpirationSeconds == nil {
			s.ServiceAccountToken.ExpirationSeconds = ptr(int64(3600))
		}
	}
}

func defaultDownwardAPIItems(items []v1.DownwardAPIVolumeFile) {
	for i := range items {
		if items[i].FieldRef != nil {
			defaultFieldSelector(items[i].FieldRef)
		}
	}
}

// defaultLegacyVolume covers the in-tree network volume types. Skiff mounts
// none of them, but defaulting keeps the pod identical to what the
// apiserver would store, which matters for mirror pods.
func defaultLegacyVolume(vs *v1.VolumeSource) {
	if s := vs.ISCSI; s != nil && s.ISCSIInterface == "" {
		s.ISCSIInterface = "default"
	}
	if s := vs.RBD; s != nil {
		setStringIfEmpty(&s.RBDPool, "rbd")
		setStringIfEmpty(&s.RadosUser, "admin")
		setStringIfEmpty(&s.Keyring, "/etc/ceph/keyring")
	}
	if s := vs.AzureDisk; s != nil {
		if s.CachingMode == nil {
			s.CachingMode = ptr(v1.AzureDataDiskCachingReadWrite)
		}
		if s.FSType == nil {
			s.FSType = ptr("ext4")
		}
		if s.ReadOnly == nil {
			s.ReadOnly = ptr(false)
		}
		if s.Kind == nil {
			s.Kind = ptr(v1.AzureSharedBlobDisk)
		}
	}
	if s := vs.ScaleIO; s != nil {
		setStringIfEmpty(&s.StorageMode, "ThinProvisioned")
		setStringIfEmpty(&s.FSType, "xfs")
	}
}

func setStringIfEmpty(s *string, def string) {
	if *s == "" {
		*s = def
	}
}
