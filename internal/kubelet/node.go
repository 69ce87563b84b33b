package kubelet

import (
	"context"

	v1 "k8s.io/api/core/v1"
)

// startNode starts keeping this node's Node object and Lease.
// TODO(nodestatus): wire internal/nodestatus once it lands.
func (k *Kubelet) startNode(ctx context.Context, spawn func(func(context.Context))) error {
	k.node = noNode{}
	return nil
}

type noNode struct{}

func (noNode) Node() *v1.Node { return nil }
