package kubelet

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/skiff-sh/skiff/internal/stats"
)

// podVolumeRefs lists the pod's set-up volumes by host path, named as the
// pod names them, with the claim of a persistentVolumeClaim volume and of
// a generic ephemeral one (<pod>-<volume>), as upstream's volume stats.
func (k *Kubelet) podVolumeRefs(uid types.UID) map[string]stats.VolumeRef {
	pod, mounted, ok := k.volumeManager.MountedVolumes(uid)
	if !ok {
		return nil
	}
	out := make(map[string]stats.VolumeRef, len(mounted))
	for _, v := range pod.Spec.Volumes {
		m, ok := mounted[v.Name]
		if !ok {
			continue
		}
		ref := stats.VolumeRef{Name: v.Name}
		switch {
		case v.PersistentVolumeClaim != nil:
			ref.ClaimNamespace, ref.ClaimName = pod.Namespace, v.PersistentVolumeClaim.ClaimName
		case v.Ephemeral != nil:
			ref.ClaimNamespace, ref.ClaimName = pod.Namespace, pod.Name+"-"+v.Name
		}
		out[m.HostPath] = ref
	}
	return out
}
