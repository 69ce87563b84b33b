package kubelet

import (
	"context"
	"errors"

	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/envvars"
	"github.com/skiff-sh/skiff/internal/podsource"
	"github.com/skiff-sh/skiff/internal/server"
	"github.com/skiff-sh/skiff/internal/statusmanager"
)

// cluster is the kubelet's apiserver side: the Node, the apiserver pod
// source, mirror pods, Secrets and ConfigMaps for environments and pulls,
// the kubelet API's delegated auth. Standalone, noCluster stands in for it
// and does nothing, so no caller checks which mode it is in.
type cluster interface {
	standalone() bool
	// sources are the pod sources the cluster adds.
	sources() []string
	// node is this node's Node, nil before it is registered; ok is false
	// standalone, where no Node will ever come.
	node() (n *v1.Node, ok bool)
	// env builds containers' environments.
	env(hostIPs []string, allocatable func() v1.ResourceList) *envvars.Builder
	// pullSecrets reads a pod's imagePullSecrets; nil: pulls are anonymous.
	pullSecrets() func(ctx context.Context, pod *v1.Pod) []v1.Secret
	// syncMirrorPod makes a static pod's mirror pod exist and match it.
	syncMirrorPod(ctx context.Context, pod *v1.Pod) error
	// deleteMirrorPods deletes mirror pods whose static pod is gone.
	deleteMirrorPods(ctx context.Context, mirrors []*v1.Pod)
	// serverAuth completes the kubelet API's authentication and TLS;
	// tlsBootstrap asks for a serving certificate from a CSR.
	serverAuth(ac *server.AuthConfig, tc *server.TLSConfig, tlsBootstrap bool) error
	// syncNodeStatus asks for the Node's status to be posted at once.
	syncNodeStatus()
	// run starts what the cluster side runs: credentials, the Node and its
	// Lease, the apiserver pod source feeding updates, status reports.
	run(ctx context.Context, spawn func(func(context.Context)), updates chan<- podsource.Update) error
}

// noCluster is the cluster side of a standalone Skiff.
type noCluster struct{}

func (noCluster) standalone() bool                             { return true }
func (noCluster) sources() []string                            { return nil }
func (noCluster) node() (*v1.Node, bool)                       { return nil, false }
func (noCluster) syncMirrorPod(context.Context, *v1.Pod) error { return nil }
func (noCluster) deleteMirrorPods(context.Context, []*v1.Pod)  {}
func (noCluster) syncNodeStatus()                              {}
func (noCluster) pullSecrets() func(context.Context, *v1.Pod) []v1.Secret {
	return nil
}

func (noCluster) env(hostIPs []string, allocatable func() v1.ResourceList) *envvars.Builder {
	return envvars.New(envvars.Config{HostIPs: hostIPs, NodeAllocatable: allocatable})
}

func (noCluster) serverAuth(_ *server.AuthConfig, _ *server.TLSConfig, tlsBootstrap bool) error {
	if tlsBootstrap {
		return errors.New("kubelet API: serverTLSBootstrap needs an apiserver (--kubeconfig) to request its certificate")
	}
	return nil
}

func (noCluster) run(context.Context, func(func(context.Context)), chan<- podsource.Update) error {
	return nil
}

// newCluster sets the kubelet's cluster side, event recorder and status
// manager from d: standalone without a client.
func (k *Kubelet) newCluster(d Deps) error {
	if d.Client == nil {
		k.cluster = noCluster{}
		k.statuses = statusmanager.New(statusmanager.Config{Pods: k, Clock: d.Clock})
		return nil
	}
	k.statuses = statusmanager.New(statusmanager.Config{
		Client: d.Client.CoreV1(), Pods: k, SyncPeriod: k.periods.StatusSync, Clock: d.Clock,
	})
	c, err := newAPICluster(k, d)
	if err != nil {
		return err
	}
	k.cluster = c
	return nil
}
