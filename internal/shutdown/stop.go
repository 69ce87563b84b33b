package shutdown

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// stopPods stops the running pods group by group, lowest priority first.
// A group ends when its pods have stopped or its budget is spent,
// whichever comes first; an empty group takes no time. Kills still
// running when their group's budget ends go on in the background and
// are added to stragglers.
func (m *Manager) stopPods(ctx context.Context, stragglers *sync.WaitGroup) {
	for _, b := range Assign(m.cfg.Groups, m.cfg.Pods()) {
		if len(b.Pods) == 0 {
			continue
		}
		if !m.stopGroup(ctx, b, stragglers) {
			return
		}
	}
}

// stopGroup stops one group's pods at once and waits for them within the
// group's budget; false if ctx ended first.
func (m *Manager) stopGroup(ctx context.Context, b Batch, stragglers *sync.WaitGroup) bool {
	var group sync.WaitGroup
	for _, p := range b.Pods {
		group.Add(1)
		stragglers.Add(1)
		go func(p *v1.Pod) {
			defer stragglers.Done()
			defer group.Done()
			grace := b.GracePeriod(p)
			klog.V(1).InfoS("Shutdown manager killing pod with gracePeriod", "pod", klog.KObj(p), "gracePeriod", grace)
			if err := m.cfg.Kill(ctx, p, grace); err != nil {
				klog.InfoS("Shutdown manager failed killing pod", "pod", klog.KObj(p), "err", err)
				return
			}
			klog.V(1).InfoS("Shutdown manager finished killing pod", "pod", klog.KObj(p))
		}(p)
	}
	done := make(chan struct{})
	stragglers.Add(1)
	go func() { defer stragglers.Done(); group.Wait(); close(done) }()
	t := m.cfg.Clock.NewTimer(time.Duration(b.GracePeriodSeconds) * time.Second)
	defer t.Stop()
	select {
	case <-done:
		klog.V(1).InfoS("Done waiting for all pods in group to terminate", "gracePeriod", b.GracePeriodSeconds, "priority", b.Priority)
	case <-t.C():
		klog.InfoS("Shutdown manager pod killing time out", "gracePeriod", b.GracePeriodSeconds, "priority", b.Priority)
	case <-ctx.Done():
		return false
	}
	return true
}
