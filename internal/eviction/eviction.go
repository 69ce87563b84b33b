// Package eviction evicts pods that use more local storage than they may,
// as upstream's eviction manager does with local storage capacity
// isolation: a pod whose emptyDir holds more than its sizeLimit is stopped
// and Failed with reason Evicted.
package eviction

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/du"
)

// Reason is the pod status reason of an evicted pod, as upstream.
const Reason = "Evicted"

// Config configures a Manager.
type Config struct {
	// Period between two measurements; upstream monitors every 10 s.
	Period time.Duration
	// PodDir is a pod's directory; its emptyDirs are under
	// volumes/kubernetes.io~empty-dir/<name>.
	PodDir func(uid types.UID) string
	// Pods are the pods that run and may be evicted.
	Pods func() []*v1.Pod
	// Evict stops the pod and fails it with Reason and message.
	Evict func(pod *v1.Pod, message string)
	// Clock ticks the checks; nil: the real one.
	Clock clock.WithTicker
}

// Manager measures emptyDir usage and evicts the pods over their limits.
type Manager struct {
	cfg Config
}

// New returns a Manager.
func New(cfg Config) *Manager {
	if cfg.Period <= 0 {
		cfg.Period = 10 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Manager{cfg: cfg}
}

// Run checks every Period until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	t := m.cfg.Clock.NewTicker(m.cfg.Period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			m.Check(ctx)
		}
	}
}

// Check measures each pod's limited emptyDirs once and evicts every pod
// with one over its limit.
func (m *Manager) Check(ctx context.Context) {
	for _, pod := range m.cfg.Pods() {
		if ctx.Err() != nil {
			return
		}
		if msg := m.overLimit(ctx, pod); msg != "" {
			klog.InfoS("Evicting pod over its local storage limit", "pod", klog.KObj(pod), "message", msg)
			m.cfg.Evict(pod, msg)
		}
	}
}

// overLimit says which emptyDir of pod exceeds its sizeLimit, if any.
// Each walk may take one Period: a tree too big to walk in that time is
// judged on the part that was walked, which it holds at least.
func (m *Manager) overLimit(ctx context.Context, pod *v1.Pod) string {
	for _, vol := range pod.Spec.Volumes {
		ed := vol.EmptyDir
		if ed == nil || ed.SizeLimit == nil || ed.SizeLimit.IsZero() {
			continue
		}
		// Below the pod's directory nothing is resolved by path: a driver
		// that sees <root>/pods may swap a directory for a symlink.
		podDir := m.cfg.PodDir(pod.UID)
		rel := filepath.Join(filepath.Base(podDir), "volumes", "kubernetes.io~empty-dir", vol.Name)
		walkCtx, cancel := context.WithTimeout(ctx, m.cfg.Period)
		used, err := du.DirBeneath(walkCtx, filepath.Dir(podDir), rel)
		cancel()
		if int64(used.Bytes) > ed.SizeLimit.Value() {
			return fmt.Sprintf("Usage of EmptyDir volume %q exceeds the limit %q. ", vol.Name, ed.SizeLimit.String())
		}
		switch {
		case err == nil, ctx.Err() != nil:
		case errors.Is(err, fs.ErrNotExist):
			klog.V(4).InfoS("Cannot measure emptyDir", "pod", klog.KObj(pod), "volume", vol.Name, "err", err)
		default:
			klog.ErrorS(err, "Cannot measure emptyDir in full", "pod", klog.KObj(pod), "volume", vol.Name, "counted", used.Bytes)
		}
	}
	return ""
}
