package podsource

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/podspec"
)

// apiReference names the first kind of API object a static pod refers to,
// in upstream's order and words ("secrets", "configmaps (via projected
// volumes)", ...), or "" when it refers to none. A static pod runs without
// the apiserver and the node authorizer grants its kubelet none of those
// objects, so upstream 1.34 (PreventStaticPodAPIReferences, on by default)
// refuses such a pod when it reads the manifest, and so does Skiff.
func apiReference(pod *v1.Pod) (string, error) {
	switch {
	case pod.Spec.ServiceAccountName != "":
		return "serviceaccounts", nil
	case refersToSecrets(pod):
		return "secrets", nil
	case refersToConfigMaps(pod):
		return "configmaps", nil
	case len(pod.Spec.ResourceClaims) > 0:
		return "resourceclaims", nil
	}
	for _, v := range pod.Spec.Volumes {
		if what, err := volumeReference(v); what != "" || err != nil {
			return what, err
		}
	}
	return "", nil
}

// volumeReference is apiReference for one volume that names no Secret or
// ConfigMap itself.
func volumeReference(v v1.Volume) (string, error) {
	s := v.VolumeSource
	switch {
	case s.CSI != nil:
		return "csidrivers (via CSI volumes)", nil
	case s.Glusterfs != nil:
		return "endpoints (via glusterFS volumes)", nil
	case s.PersistentVolumeClaim != nil:
		return "persistentvolumeclaims", nil
	case s.Ephemeral != nil:
		return "persistentvolumeclaims (via ephemeral volumes)", nil
	case s.Projected != nil:
		for _, p := range s.Projected.Sources {
			switch {
			case p.ServiceAccountToken != nil:
				return "serviceaccounts (via projected volumes)", nil
			case p.ClusterTrustBundle != nil:
				return "clustertrustbundles", nil
			case p.PodCertificate != nil:
				return "podcertificates", nil
			case p.DownwardAPI == nil && p.Secret == nil && p.ConfigMap == nil:
				return "", fmt.Errorf("unknown source for projected volume %q", v.Name)
			}
		}
	}
	return "", nil
}

// refersToSecrets: pull secrets, env and envFrom of every container, and
// every volume source that names a Secret.
func refersToSecrets(pod *v1.Pod) bool {
	if len(pod.Spec.ImagePullSecrets) > 0 {
		return true
	}
	if anyEnv(pod, func(e v1.EnvVar) bool { return e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil },
		func(e v1.EnvFromSource) bool { return e.SecretRef != nil }) {
		return true
	}
	for _, v := range pod.Spec.Volumes {
		s := v.VolumeSource
		switch {
		case s.Secret != nil, s.AzureFile != nil,
			s.CephFS != nil && s.CephFS.SecretRef != nil,
			s.Cinder != nil && s.Cinder.SecretRef != nil,
			s.FlexVolume != nil && s.FlexVolume.SecretRef != nil,
			s.RBD != nil && s.RBD.SecretRef != nil,
			s.ScaleIO != nil && s.ScaleIO.SecretRef != nil,
			s.ISCSI != nil && s.ISCSI.SecretRef != nil,
			s.StorageOS != nil && s.StorageOS.SecretRef != nil,
			s.CSI != nil && s.CSI.NodePublishSecretRef != nil:
			return true
		case s.Projected != nil:
			for _, p := range s.Projected.Sources {
				if p.Secret != nil {
					return true
				}
			}
		}
	}
	return false
}

// refersToConfigMaps: env and envFrom of every container, configMap
// volumes and projected configMap sources.
func refersToConfigMaps(pod *v1.Pod) bool {
	if anyEnv(pod, func(e v1.EnvVar) bool { return e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil },
		func(e v1.EnvFromSource) bool { return e.ConfigMapRef != nil }) {
		return true
	}
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap != nil {
			return true
		}
		if v.Projected != nil {
			for _, p := range v.Projected.Sources {
				if p.ConfigMap != nil {
					return true
				}
			}
		}
	}
	return false
}

// anyEnv reports whether an env var or envFrom source of any container
// (init, app or ephemeral) matches.
func anyEnv(pod *v1.Pod, env func(v1.EnvVar) bool, from func(v1.EnvFromSource) bool) bool {
	found := false
	podspec.ForEachContainer(&pod.Spec, func(c *v1.Container) {
		found = found || slices.ContainsFunc(c.Env, env) || slices.ContainsFunc(c.EnvFrom, from)
	})
	return found
}
