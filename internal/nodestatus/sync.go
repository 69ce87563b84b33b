package nodestatus

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

const (
	// nodeStatusUpdateRetry is how many times one update is tried.
	nodeStatusUpdateRetry = 5
	// Right after start, while the posted node is not Ready, status is
	// recomputed this often so that Ready is posted as soon as the runtime
	// (typically its network) is ready, as upstream's fastStatusUpdateOnce.
	fastStatusPeriod = 100 * time.Millisecond
	fastStatusWindow = 2 * time.Minute
	statusJitter     = 0.04
)

// statusLoop updates the node status every nodeStatusUpdateFrequency until
// ctx ends. In between, while the node is becoming ready after start, it
// checks every fastStatusPeriod whether the node turned Ready, without
// apiserver calls unless it did.
func (c *Controller) statusLoop(ctx context.Context) {
	start := c.clock.Now()
	var next time.Time // of the next full update
	for {
		now := c.clock.Now()
		if !now.Before(next) {
			if err := c.syncNodeStatus(ctx); err != nil && ctx.Err() == nil {
				klog.FromContext(ctx).Error(err, "Unable to update node status")
			}
			next = c.clock.Now().Add(wait.Jitter(c.kc.NodeStatusUpdateFrequency.Duration, statusJitter))
		} else {
			c.fastUpdate(ctx)
		}
		wake := next.Sub(c.clock.Now())
		if !c.isReadyPosted() && c.clock.Since(start) < fastStatusWindow {
			wake = min(wake, fastStatusPeriod)
		}
		woken, asked := c.sleepOrSync(ctx, wake)
		if !woken {
			return
		}
		if asked {
			next = time.Time{} // due now
		}
	}
}

// sleepOrSync waits d, or until SyncNow asks for an update (asked); woken
// is false if ctx ended first.
func (c *Controller) sleepOrSync(ctx context.Context, d time.Duration) (woken, asked bool) {
	t := c.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false, false
	case <-t.C():
		return true, false
	case <-c.syncNow:
		return true, true
	}
}

// fastUpdate posts the status as soon as it turns Ready (upstream's
// fastNodeStatusUpdate): the runtime's network typically becomes ready a
// while after the kubelet starts, and the scheduler waits for Ready.
func (c *Controller) fastUpdate(ctx context.Context) {
	original := c.Node()
	if original == nil {
		return
	}
	if r := findCondition(original, v1.NodeReady); r != nil && r.Status == v1.ConditionTrue {
		c.mu.Lock()
		c.readyPosted = true
		c.mu.Unlock()
		return
	}
	c.runtime.update(ctx)
	node, changed := c.updateNode(ctx, original)
	if r := findCondition(node, v1.NodeReady); !changed || r == nil || r.Status != v1.ConditionTrue {
		return
	}
	klog.FromContext(ctx).Info("Fast updating node status as it just became ready")
	if err := c.postStatus(ctx, original, node); err != nil {
		// The cached node may be stale: the full update reads it afresh.
		klog.FromContext(ctx).Error(err, "Error updating node status, will retry with a full update")
		if err := c.syncNodeStatus(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "Unable to update node status")
		}
	}
}

// syncNodeStatus computes the status and posts it if needed, trying up to
// nodeStatusUpdateRetry times.
func (c *Controller) syncNodeStatus(ctx context.Context) error {
	c.runtime.update(ctx)
	for i := 0; i < nodeStatusUpdateRetry; i++ {
		err := c.tryUpdateNodeStatus(ctx, i)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if i > 0 && c.cfg.OnRepeatedHeartbeatFailure != nil {
			c.cfg.OnRepeatedHeartbeatFailure()
		}
		klog.FromContext(ctx).Error(err, "Error updating node status, will retry")
	}
	return errors.New("update node status exceeds retry count")
}

// tryUpdateNodeStatus posts the status when something other than heartbeat
// times changed, or when nodeStatusReportFrequency has passed since the
// last post (the lease is the heartbeat in between).
func (c *Controller) tryUpdateNodeStatus(ctx context.Context, try int) error {
	original, err := c.currentNode(ctx, try)
	if err != nil {
		return err
	}
	node, changed := c.updateNode(ctx, original)
	c.mu.Lock()
	due := c.clock.Since(c.lastReport) >= c.kc.NodeStatusReportFrequency.Duration
	c.mu.Unlock()
	if !changed && !due {
		return nil
	}
	return c.postStatus(ctx, original, node)
}

// postStatus patches the status from original to node and remembers the
// result.
func (c *Controller) postStatus(ctx context.Context, original, node *v1.Node) error {
	updated, err := patchNodeStatus(ctx, c.cfg.HeartbeatClient.CoreV1().Nodes(), original, node)
	if err != nil {
		return err
	}
	ready := findCondition(updated, v1.NodeReady)
	c.mu.Lock()
	c.lastReport = c.clock.Now()
	c.latest = updated
	c.readyPosted = ready != nil && ready.Status == v1.ConditionTrue
	c.mu.Unlock()
	return nil
}

// currentNode is the Node to update: from the watch cache on the first
// try (the common case costs no GET), from the apiserver on retries.
func (c *Controller) currentNode(ctx context.Context, try int) (*v1.Node, error) {
	c.mu.Lock()
	lister := c.lister
	c.mu.Unlock()
	if try == 0 && lister != nil {
		if n, err := lister.Get(c.cfg.NodeName); err == nil {
			return n, nil
		}
	}
	n, err := c.cfg.HeartbeatClient.CoreV1().Nodes().Get(ctx, c.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("error getting node %q: %w", c.cfg.NodeName, err)
	}
	return n, nil
}

// updateNode returns a copy of original with the status recomputed, and
// whether anything but heartbeat times changed.
func (c *Controller) updateNode(ctx context.Context, original *v1.Node) (*v1.Node, bool) {
	node := original.DeepCopy()
	podCIDRChanged := c.updatePodCIDR(ctx, node.Spec.PodCIDRs)
	// Someone may have removed the OS and arch labels the scheduler relies on.
	labelsChanged := false
	for k, v := range map[string]string{v1.LabelOSStable: goruntime.GOOS, v1.LabelArchStable: goruntime.GOARCH} {
		if node.Labels[k] != v {
			if node.Labels == nil {
				node.Labels = map[string]string{}
			}
			node.Labels[k] = v
			labelsChanged = true
		}
	}
	c.setNodeStatus(ctx, node)
	return node, podCIDRChanged || labelsChanged || statusChanged(&original.Status, &node.Status)
}

func (c *Controller) isReadyPosted() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.readyPosted
}

// statusChanged compares two statuses ignoring the conditions' heartbeat
// times.
func statusChanged(a, b *v1.NodeStatus) bool {
	if conditionsChanged(a.Conditions, b.Conditions) {
		return true
	}
	ac, bc := a.DeepCopy(), b.DeepCopy()
	ac.Conditions, bc.Conditions = nil, nil
	return !apiequality.Semantic.DeepEqual(ac, bc)
}

func conditionsChanged(a, b []v1.NodeCondition) bool {
	if len(a) != len(b) {
		return true
	}
	ac, bc := append([]v1.NodeCondition(nil), a...), append([]v1.NodeCondition(nil), b...)
	byType := func(s []v1.NodeCondition) func(i, j int) bool {
		return func(i, j int) bool { return s[i].Type < s[j].Type }
	}
	sort.SliceStable(ac, byType(ac))
	sort.SliceStable(bc, byType(bc))
	for i := range ac {
		ac[i].LastHeartbeatTime, bc[i].LastHeartbeatTime = metav1.Time{}, metav1.Time{}
		if !apiequality.Semantic.DeepEqual(ac[i], bc[i]) {
			return true
		}
	}
	return false
}
