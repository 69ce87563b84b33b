package volumemanager

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/skiff-sh/skiff/internal/volume"
)

// MountedVolumes returns the pod as last desired and those of its volumes
// that are set up, by name (upstream's ListVolumesForPod); false when
// the pod is not desired.
func (m *Manager) MountedVolumes(uid types.UID) (*v1.Pod, map[string]volume.Mounted, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	pod, ok := m.desired[uid]
	if !ok {
		return nil, nil, false
	}
	vols, _ := m.mountedLocked(pod)
	return pod, vols, true
}
