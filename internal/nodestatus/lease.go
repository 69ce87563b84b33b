package nodestatus

import (
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/component-helpers/apimachinery/lease"
)

// newLeaseController renews the Lease named after the node in
// kube-node-lease: the heartbeat the node lifecycle controller watches.
func (c *Controller) newLeaseController() lease.Controller {
	return lease.NewController(c.clock, leaseClientset{c: c.cfg.HeartbeatClient.CoordinationV1()}, c.cfg.NodeName, c.kc.NodeLeaseDurationSeconds,
		c.cfg.OnRepeatedHeartbeatFailure, c.leaseRenew, c.cfg.NodeName, v1.NamespaceNodeLease, c.setLeaseOwner)
}

// setLeaseOwner makes the Node own its Lease, so that deleting the Node
// deletes the Lease. An error blocks only the Lease's creation (the lease
// controller tries again next interval), not its renewal.
func (c *Controller) setLeaseOwner(l *coordinationv1.Lease) error {
	if len(l.OwnerReferences) > 0 {
		return nil
	}
	uid := c.nodeUID()
	if uid == "" {
		return fmt.Errorf("node %q is not known yet: cannot set it as the owner of its lease", c.cfg.NodeName)
	}
	l.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: v1.SchemeGroupVersion.Version,
		Kind:       "Node",
		Name:       c.cfg.NodeName,
		UID:        uid,
	}}
	return nil
}

// leaseClientset is the kubernetes.Interface that component-helpers'
// lease.NewController takes, although it calls only CoordinationV1() on
// it (component-helpers v0.34.4, apimachinery/lease/controller.go: the
// Leases client is taken once, in NewController). A real clientset
// would link every API group's client into Skiff (see package kube);
// the embedded Interface is nil, so any other method would panic.
// TestRunRegistersPostsStatusAndRenewsLease renews a Lease through it;
// check controller.go again when component-helpers is upgraded.
type leaseClientset struct {
	kubernetes.Interface // nil: not called by the lease controller
	c                    coordinationv1client.CoordinationV1Interface
}

func (l leaseClientset) CoordinationV1() coordinationv1client.CoordinationV1Interface { return l.c }
