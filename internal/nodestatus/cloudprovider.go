package nodestatus

import (
	"context"
	"net"
	"strings"

	v1 "k8s.io/api/core/v1"
)

const (
	// TaintExternalCloudProvider marks a node registered with
	// --cloud-provider=external until the cloud controller manager has
	// initialized it (and removed the taint).
	TaintExternalCloudProvider = "node.cloudprovider.kubernetes.io/uninitialized"
	// annotationProvidedNodeIP hands --node-ip to the external cloud
	// provider, which decides the node's addresses.
	annotationProvidedNodeIP = "alpha.kubernetes.io/provided-node-ip"
)

// setCloudProviderSpec adds what the initial Node gets from the provider
// settings, as upstream: spec.providerID, and with an external cloud
// provider the uninitialized taint after registerWithTaints.
func (c *Controller) setCloudProviderSpec(node *v1.Node) {
	if c.kc.ProviderID != "" {
		node.Spec.ProviderID = c.kc.ProviderID
	}
	if !c.cfg.ExternalCloudProvider {
		return
	}
	node.Spec.Taints = append(node.Spec.Taints, v1.Taint{
		Key:    TaintExternalCloudProvider,
		Value:  "true",
		Effect: v1.TaintEffectNoSchedule,
	})
}

// setAddresses sets status.addresses. With an external cloud provider the
// provider owns them, as upstream: --node-ip is announced in an annotation,
// addresses already on the Node are kept, and without --node-ip the node
// registers with its hostname alone until the provider sets them.
func (c *Controller) setAddresses(ctx context.Context, node *v1.Node) error {
	if c.cfg.ExternalCloudProvider && len(c.nodeIPs) > 0 {
		if node.Annotations == nil {
			node.Annotations = map[string]string{}
		}
		node.Annotations[annotationProvidedNodeIP] = joinIPs(c.nodeIPs)
	} else {
		delete(node.Annotations, annotationProvidedNodeIP)
	}
	if c.cfg.ExternalCloudProvider {
		if len(node.Status.Addresses) > 0 {
			return nil
		}
		if len(c.cfg.NodeIPs) == 0 {
			node.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeHostName, Address: c.cfg.NodeName}}
			return nil
		}
	}
	addrs, err := c.addresses(ctx)
	if err != nil {
		return err
	}
	node.Status.Addresses = addrs
	return nil
}

func joinIPs(ips []net.IP) string {
	s := make([]string, len(ips))
	for i, ip := range ips {
		s[i] = ip.String()
	}
	return strings.Join(s, ",")
}
