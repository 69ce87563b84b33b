package nodestatus

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/kube"
)

// Run registers the Node (retrying while the apiserver is unreachable),
// then keeps its status and Lease up to date until ctx ends. Standalone (no
// client) it only keeps the local Node that Node() returns up to date.
func (c *Controller) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("node", c.cfg.NodeName)
	ctx = klog.NewContext(ctx, logger)
	if c.cfg.Client == nil {
		c.runStandalone(ctx)
		return
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	// Only this node is watched; Node() and the first try of each status
	// update read from this cache.
	informer := kube.NewInformer(c.cfg.Client.CoreV1().Nodes(), &v1.Node{}, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", c.cfg.NodeName).String()
	})
	lister := corelisters.NewNodeLister(informer.GetIndexer())
	defer kube.RunInformer(ctx, informer)() // waits after ctx is done: Run returns only then
	c.mu.Lock()
	c.lister = lister
	c.mu.Unlock()

	if ptr.Deref(c.kc.RegisterNode, true) && !c.register(ctx) {
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.newLeaseController().Run(ctx)
	}()
	c.statusLoop(ctx)
}

// runStandalone recomputes the local Node every nodeStatusUpdateFrequency:
// without an apiserver it is still what pod admission checks.
func (c *Controller) runStandalone(ctx context.Context) {
	for {
		c.runtime.update(ctx)
		node := c.Node()
		if node == nil {
			node = c.initialNode(ctx)
		} else {
			c.setNodeStatus(ctx, node)
		}
		c.setLatest(node)
		if !c.sleep(ctx, c.kc.NodeStatusUpdateFrequency.Duration) {
			return
		}
	}
}
