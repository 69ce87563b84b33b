package volumemanager

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/volume"
)

// Expander grows a pod's claim volume on the node when its claim awaits
// that, and says what to tell the pod and the claim (*volume.Manager).
type Expander interface {
	ExpandVolume(ctx context.Context, pod *v1.Pod, vol *v1.Volume) (*volume.Expansion, error)
}

// expands tells whether the volume is to be checked for growth: a claim,
// when there is an Expander. Checked after its setup and on every sync
// of its pod (as upstream's populator does when it processes the pod
// again), each check an operation of the volume like a setup: one at a
// time, retried with back-off after a failure.
func (m *Manager) expands(vol *v1.Volume) bool {
	return m.cfg.Expander != nil && volume.Expands(vol)
}

// expand is one expansion check of a set-up volume.
func (m *Manager) expand(ctx context.Context, pod *v1.Pod, vol *v1.Volume, k volKey, op *opState) {
	opCtx, cancel := context.WithTimeout(ctx, m.cfg.OpTimeout)
	res, err := m.cfg.Expander.ExpandVolume(opCtx, pod, vol)
	cancel()
	m.mu.Lock()
	if err != nil {
		op.failures++
		op.lastErr = err
		op.notBefore = m.cfg.Clock.Now().Add(backOff(op.failures))
	} else {
		op.failures, op.lastErr, op.notBefore = 0, nil, time.Time{}
		if a := m.actual[k]; a != nil {
			a.expand, a.noExpand = false, res != nil && res.Stop
		}
	}
	m.mu.Unlock()
	// Told before the operation ends, so that a retry's events follow.
	m.report(ctx, pod, vol, res, err)
	m.mu.Lock()
	close(op.done)
	op.done = nil
	m.mu.Unlock()
	m.poke()
}

// report logs an expansion check's outcome and tells the pod and the
// claim of it.
func (m *Manager) report(ctx context.Context, pod *v1.Pod, vol *v1.Volume, res *volume.Expansion, err error) {
	if err != nil {
		if ctx.Err() == nil {
			klog.ErrorS(err, "Volume expansion failed", "pod", klog.KObj(pod), "volume", vol.Name)
			m.cfg.Recorder.Eventf(pod, v1.EventTypeWarning, volume.ReasonResizeFailed, "%v", err)
		}
		return
	}
	if res == nil {
		return
	}
	klog.InfoS("Volume expansion", "pod", klog.KObj(pod), "volume", vol.Name, "reason", res.Reason, "message", res.Message)
	m.cfg.Recorder.Eventf(pod, res.EventType, res.Reason, "%s", res.Message)
	if res.PVC != nil {
		m.cfg.Recorder.Eventf(res.PVC, res.EventType, res.Reason, "%s", res.Message)
	}
}
