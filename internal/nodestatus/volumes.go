package nodestatus

import (
	"context"

	v1 "k8s.io/api/core/v1"
)

// setVolumesInUse sets status.volumesInUse, as upstream's VolumesInUse
// setter. volumesAttached is the attach/detach controller's: the kubelet
// never writes it, and the status patch, made of what changed, leaves it
// as the controller wrote it.
func (c *Controller) setVolumesInUse(ctx context.Context, node *v1.Node) {
	if c.cfg.VolumesInUse != nil {
		node.Status.VolumesInUse = c.cfg.VolumesInUse(ctx)
	}
}
