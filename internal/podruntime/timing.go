package podruntime

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Timer records how long the steps of a pod's start take (a
// *podstartup.Tracker); phase is one of podstartup's phase names. Pulled
// gets each image pull's start and end, which the start SLI leaves out.
type Timer interface {
	Observe(uid types.UID, phase, container string, d time.Duration)
	Pulled(uid types.UID, start, end time.Time)
}

// Phase names given to the Timer (podstartup's).
const (
	phaseSandbox = "sandbox"
	phaseImage   = "image"
	phaseCreate  = "create"
	phaseStart   = "start"
)

// timed records the time since start, if a Timer is configured.
func (m *Manager) timed(pod *v1.Pod, phase, container string, start time.Time) {
	if m.cfg.Timer != nil {
		m.cfg.Timer.Observe(pod.UID, phase, container, m.cfg.Clock.Since(start))
	}
}
