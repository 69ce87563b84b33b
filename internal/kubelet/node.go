package kubelet

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/certs"
	"github.com/skiff-sh/skiff/internal/nodestatus"
)

// startNode starts keeping this node's Node object and Lease; PLEG's
// health is part of the node's readiness, as upstream.
func (k *Kubelet) startNode(ctx context.Context, spawn func(func(context.Context))) error {
	c, err := nodestatus.New(nodestatus.Config{
		Client:         k.client,
		NodeName:       k.cfg.NodeName,
		NodeIPs:        splitIPs(k.cfg.NodeIP),
		Kubelet:        k.cfg.Kubelet,
		NodeLabels:     k.cfg.NodeLabels,
		RootDir:        k.cfg.RootDir,
		Runtime:        k.cri.Runtime,
		KubeletVersion: Version,
		Recorder:       k.recorder,
		HealthChecks:   []nodestatus.HealthCheck{{Name: "PLEG", Check: k.pleg.Healthy}},
		Pressure:       k.pressureConditions,
	})
	if err != nil {
		return err
	}
	k.node = c
	spawn(c.Run)
	if k.cfg.Kubelet.ServerTLSBootstrap {
		s, err := certs.NewServing(certs.ServingConfig{
			Client: k.client, NodeName: k.cfg.NodeName, CertDir: certDir(k.cfg),
			CertFile: k.cfg.Kubelet.TLSCertFile, KeyFile: k.cfg.Kubelet.TLSPrivateKeyFile,
			Addresses: func() []v1.NodeAddress {
				if n := c.Node(); n != nil {
					return n.Status.Addresses
				}
				return nil
			},
		})
		if err != nil {
			return err
		}
		k.serving = s
		spawn(s.Run)
	}
	return nil
}

// allocatable is the node's allocatable resources, nil before the Node is
// known (or standalone).
func (k *Kubelet) allocatable() v1.ResourceList {
	if k.node == nil {
		return nil
	}
	if n := k.node.Node(); n != nil {
		return n.Status.Allocatable
	}
	return nil
}
