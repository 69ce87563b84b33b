package nodestatus

import (
	"k8s.io/klog/v2"
)

// nodeEvent records a node status event the way upstream words them.
func (c *Controller) nodeEvent(eventType, reason string) {
	klog.V(2).InfoS("Recording event message for node", "node", klog.KRef("", c.cfg.NodeName), "event", reason)
	c.recordEvent(eventType, reason, "Node %s status is now: %s", c.cfg.NodeName, reason)
}

// recordEvent records an event about this node, if there is a recorder.
func (c *Controller) recordEvent(eventType, reason, format string, args ...interface{}) {
	if c.cfg.Recorder != nil {
		c.cfg.Recorder.Eventf(c.nodeRef, eventType, reason, format, args...)
	}
}
