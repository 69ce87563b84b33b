package volumemanager

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/volume/volerr"
)

// defaultStep is the step a setup error names when it names none.
const defaultStep = "MountVolume.SetUp"

// reportFailure logs a failed setup and records it on the pod as a
// FailedMount event naming the failed step, as upstream's operation
// generator does; a pending precondition (a volume not yet attached) is
// only logged, as upstream records no event for it.
func (m *Manager) reportFailure(pod *v1.Pod, vol *v1.Volume, failures int, err error) {
	step, pending := volerr.Of(err)
	if pending {
		klog.V(2).InfoS("Volume not ready for setup yet", "pod", klog.KObj(pod), "volume", vol.Name, "failures", failures, "reason", err.Error())
		return
	}
	if step == "" {
		step = defaultStep
	}
	klog.ErrorS(err, "Volume setup failed", "pod", klog.KObj(pod), "volume", vol.Name, "step", step, "failures", failures)
	m.cfg.Recorder.Eventf(pod, v1.EventTypeWarning, "FailedMount", "%s failed for volume %q : %v", step, vol.Name, err)
}
