package nodestatus

import (
	"context"
	goruntime "runtime"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// capacity is the machine's capacity now (the root filesystem is measured
// each time, the rest was read at startup).
func (c *Controller) capacity() v1.ResourceList {
	ephemeral := int64(-1)
	if ptr.Deref(c.kc.LocalStorageCapacityIsolation, true) {
		if b, err := c.rootFS(); err != nil {
			klog.ErrorS(err, "Cannot measure the root filesystem; ephemeral-storage capacity left as is", "rootDir", c.cfg.RootDir)
		} else {
			ephemeral = b
		}
	}
	return c.machine.capacity(podsCapacity(c.kc, c.machine.numCPU), ephemeral)
}

// setNodeStatus fills in node.Status in place from the machine, the runtime
// and the configuration, as upstream's status setters do. The runtime state
// must have been updated by the caller.
func (c *Controller) setNodeStatus(ctx context.Context, node *v1.Node) {
	now := metav1.NewTime(c.clock.Now())
	if err := c.setAddresses(ctx, node); err != nil {
		klog.FromContext(ctx).Error(err, "Failed to set node addresses", "node", klog.KObj(node))
	}
	c.setMachineInfo(node)
	c.setVersionInfo(node)
	if c.cfg.Images != nil {
		setImages(ctx, node, c.cfg.Images, ptr.Deref(c.kc.NodeStatusMaxImages, 50))
	}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = c.kc.Port
	c.setVolumesInUse(ctx, node)

	event := func(reason string) { c.nodeEvent(v1.EventTypeNormal, reason) }
	var under []v1.NodeConditionType
	if c.cfg.Pressure != nil {
		under = c.cfg.Pressure()
	}
	for _, p := range pressures {
		setPressure(node, p, slices.Contains(under, p.typ), now, event)
	}
	notReady := c.runtime.errors()
	if c.cfg.NotReady != nil {
		notReady = utilerrors.NewAggregate([]error{notReady, c.cfg.NotReady()})
	}
	ready := setReady(node, notReady, requiredCapacity(ptr.Deref(c.kc.LocalStorageCapacityIsolation, true)), now, event)
	if ready.Status != v1.ConditionTrue && ready.LastTransitionTime.Equal(&now) {
		klog.FromContext(ctx).Info("Node became not ready", "node", klog.KObj(node), "condition", ready)
	}
}

// setMachineInfo sets capacity, allocatable and the machine's identity.
// Capacity entries someone else manages (extended resources) are kept.
func (c *Controller) setMachineInfo(node *v1.Node) {
	capacity := c.capacity()
	if node.Status.Capacity == nil {
		node.Status.Capacity = v1.ResourceList{}
	}
	for name, q := range capacity {
		node.Status.Capacity[name] = q
	}
	devices := c.setDeviceCapacity(node)
	info := &node.Status.NodeInfo
	info.MachineID, info.SystemUUID = c.machine.machineID, c.machine.systemUUID
	if info.BootID != "" && info.BootID != c.machine.bootID {
		c.recordEvent(v1.EventTypeWarning, "Rebooted", "Node %s has been rebooted, boot id: %s", c.cfg.NodeName, c.machine.bootID)
	}
	info.BootID = c.machine.bootID

	if node.Status.Allocatable == nil {
		node.Status.Allocatable = v1.ResourceList{}
	}
	for name := range node.Status.Allocatable {
		if _, ok := node.Status.Capacity[name]; !ok && isExtendedResource(name) {
			delete(node.Status.Allocatable, name)
		}
	}
	for name, q := range allocatable(node.Status.Capacity, c.res.reserved(capacity)) {
		node.Status.Allocatable[name] = q
	}
	for name, q := range devices {
		node.Status.Allocatable[name] = q
	}
	c.mu.Lock()
	c.allocatable = node.Status.Allocatable.DeepCopy()
	c.mu.Unlock()
}

// setDeviceCapacity puts the device plugins' resources in the capacity,
// a resource gone at zero (as upstream, rather than removed, so pods
// bound to it are not counted against nothing), and returns their
// allocatable.
func (c *Controller) setDeviceCapacity(node *v1.Node) v1.ResourceList {
	if c.cfg.Extended == nil {
		return nil
	}
	capacity, alloc, removed := c.cfg.Extended()
	for name, q := range capacity {
		node.Status.Capacity[name] = q
	}
	for _, name := range removed {
		if _, ok := capacity[v1.ResourceName(name)]; !ok {
			node.Status.Capacity[v1.ResourceName(name)] = *resource.NewQuantity(0, resource.DecimalSI)
		}
	}
	return alloc
}

// setVersionInfo sets the software half of nodeInfo.
func (c *Controller) setVersionInfo(node *v1.Node) {
	info := &node.Status.NodeInfo
	info.KernelVersion = c.machine.kernelVersion
	info.OSImage = c.machine.osImage
	info.OperatingSystem, info.Architecture = goruntime.GOOS, goruntime.GOARCH
	info.KubeletVersion = c.version
	var handlers []v1.NodeRuntimeHandler
	info.ContainerRuntimeVersion, handlers, node.Status.Features = c.runtime.info()
	node.Status.RuntimeHandlers = handlers
}

// isExtendedResource reports a resource outside the kubernetes.io domain,
// e.g. one a device plugin advertises.
func isExtendedResource(name v1.ResourceName) bool {
	s := string(name)
	return strings.Contains(s, "/") && !strings.Contains(s, "kubernetes.io/") && !strings.HasPrefix(s, "requests.")
}
