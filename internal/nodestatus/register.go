package nodestatus

import (
	"context"
	goruntime "runtime"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

const (
	// annotationControllerAttach tells the attach/detach controller that it
	// attaches this node's volumes.
	annotationControllerAttach = "volumes.kubernetes.io/controller-managed-attach-detach"
	// The deprecated beta OS and arch labels upstream still sets.
	labelOSBeta   = "beta.kubernetes.io/os"
	labelArchBeta = "beta.kubernetes.io/arch"

	registerInitialBackoff = 100 * time.Millisecond
	registerMaxBackoff     = 7 * time.Second
)

// defaultLabels are the labels the kubelet owns on re-registration: those of
// them the initial node has are reset to its values.
var defaultLabels = []string{
	v1.LabelHostname,
	v1.LabelTopologyZone,
	v1.LabelTopologyRegion,
	v1.LabelFailureDomainBetaZone,
	v1.LabelFailureDomainBetaRegion,
	v1.LabelInstanceTypeStable,
	v1.LabelInstanceType,
	v1.LabelOSStable,
	v1.LabelArchStable,
	v1.LabelWindowsBuild,
	labelOSBeta,
	labelArchBeta,
}

// initialNode is the Node this kubelet registers: default labels, then
// --node-labels, registerWithTaints, providerID and the cloud provider's
// taint, and a full status.
func (c *Controller) initialNode(ctx context.Context) *v1.Node {
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: c.cfg.NodeName,
			Labels: map[string]string{
				v1.LabelHostname:   c.cfg.NodeName,
				v1.LabelOSStable:   goruntime.GOOS,
				v1.LabelArchStable: goruntime.GOARCH,
				labelOSBeta:        goruntime.GOOS,
				labelArchBeta:      goruntime.GOARCH,
			},
		},
	}
	if len(c.kc.RegisterWithTaints) > 0 {
		node.Spec.Taints = append([]v1.Taint(nil), c.kc.RegisterWithTaints...)
	}
	c.setCloudProviderSpec(node)
	if ptr.Deref(c.kc.EnableControllerAttachDetach, true) {
		node.Annotations = map[string]string{annotationControllerAttach: "true"}
	}
	for k, v := range c.cfg.NodeLabels {
		if old, ok := node.Labels[k]; ok && old != v {
			klog.FromContext(ctx).Info("The node label will overwrite default setting", "labelKey", k, "labelValue", v, "default", old)
		}
		node.Labels[k] = v
	}
	c.setNodeStatus(ctx, node)
	return node
}

// register creates the Node, retrying with back-off (100 ms doubling to
// 7 s, as upstream) until it succeeds or ctx ends. It reports success.
func (c *Controller) register(ctx context.Context) bool {
	logger := klog.FromContext(ctx)
	step := registerInitialBackoff
	for {
		if !c.sleep(ctx, step) {
			return false
		}
		step = min(2*step, registerMaxBackoff)
		c.runtime.update(ctx)
		node := c.initialNode(ctx)
		logger.Info("Attempting to register node", "node", klog.KObj(node))
		if c.tryRegister(ctx, node) {
			logger.Info("Successfully registered node", "node", klog.KObj(node))
			return true
		}
	}
}

// tryRegister creates the Node; if it exists already, it reconciles what
// the kubelet owns (as upstream: the attach/detach annotation, default
// labels, huge page capacity; taints are left alone).
func (c *Controller) tryRegister(ctx context.Context, node *v1.Node) bool {
	logger := klog.FromContext(ctx)
	nodes := c.cfg.Client.CoreV1().Nodes()
	created, err := nodes.Create(ctx, node, metav1.CreateOptions{})
	if err == nil {
		c.setLatest(created)
		return true
	}
	if !apierrors.IsAlreadyExists(err) {
		logger.Error(err, "Unable to register node with API server", "node", klog.KObj(node))
		return false
	}
	existing, err := nodes.Get(ctx, node.Name, metav1.GetOptions{})
	if err != nil {
		logger.Error(err, "Unable to register node with API server, error getting existing node", "node", klog.KObj(node))
		return false
	}
	logger.Info("Node was previously registered", "node", klog.KObj(node))
	original := existing.DeepCopy()
	update := reconcileAttachAnnotation(node, existing)
	update = reconcileDefaultLabels(node, existing) || update
	update = reconcileHugePages(node, existing) || update
	if update {
		patched, err := patchNodeStatus(ctx, c.cfg.Client.CoreV1().Nodes(), original, existing)
		if err != nil {
			logger.Error(err, "Unable to reconcile node with API server, error updating node", "node", klog.KObj(node))
			return false
		}
		existing = patched
	}
	c.setLatest(existing)
	return true
}

func reconcileAttachAnnotation(initial, existing *v1.Node) bool {
	want, set := initial.Annotations[annotationControllerAttach]
	if existing.Annotations[annotationControllerAttach] == want {
		return false
	}
	if !set {
		delete(existing.Annotations, annotationControllerAttach)
		return true
	}
	if existing.Annotations == nil {
		existing.Annotations = map[string]string{}
	}
	existing.Annotations[annotationControllerAttach] = want
	return true
}

// reconcileDefaultLabels resets the default labels the initial node has;
// an empty value removes the label.
func reconcileDefaultLabels(initial, existing *v1.Node) bool {
	changed := false
	if existing.Labels == nil {
		existing.Labels = map[string]string{}
	}
	for _, l := range defaultLabels {
		want, ok := initial.Labels[l]
		if !ok {
			continue
		}
		if existing.Labels[l] != want {
			existing.Labels[l] = want
			changed = true
		}
		if existing.Labels[l] == "" {
			delete(existing.Labels, l)
		}
	}
	return changed
}

// reconcileHugePages makes the existing node's huge page capacity and
// allocatable match the machine: sizes added, changed or gone.
func reconcileHugePages(initial, existing *v1.Node) bool {
	changed := false
	if existing.Status.Capacity == nil {
		existing.Status.Capacity = initial.Status.Capacity.DeepCopy()
		changed = initial.Status.Capacity != nil
	}
	if existing.Status.Allocatable == nil {
		existing.Status.Allocatable = initial.Status.Allocatable.DeepCopy()
		changed = changed || initial.Status.Allocatable != nil
	}
	if existing.Status.Capacity == nil {
		existing.Status.Capacity = v1.ResourceList{}
	}
	if existing.Status.Allocatable == nil {
		existing.Status.Allocatable = v1.ResourceList{}
	}
	for name, want := range initial.Status.Capacity {
		if !isHugePages(name) {
			continue
		}
		got, ok := existing.Status.Capacity[name]
		if !ok || got.Cmp(want) != 0 {
			existing.Status.Capacity[name] = want.DeepCopy()
			changed = true
		}
		wantAlloc := initial.Status.Allocatable[name]
		gotAlloc, ok2 := existing.Status.Allocatable[name]
		if !ok || !ok2 || gotAlloc.Cmp(wantAlloc) != 0 {
			existing.Status.Allocatable[name] = wantAlloc.DeepCopy()
			changed = true
		}
	}
	for name := range existing.Status.Capacity {
		if _, ok := initial.Status.Capacity[name]; isHugePages(name) && !ok {
			delete(existing.Status.Capacity, name)
			delete(existing.Status.Allocatable, name)
			klog.InfoS("Removing huge page resource which is no longer supported", "resourceName", name)
			changed = true
		}
	}
	return changed
}

func isHugePages(name v1.ResourceName) bool {
	return strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix)
}

// sleep waits d on the controller's clock; false if ctx ended first.
func (c *Controller) sleep(ctx context.Context, d time.Duration) bool {
	t := c.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}
