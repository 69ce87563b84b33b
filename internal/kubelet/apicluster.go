package kubelet

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/certs"
	"github.com/skiff-sh/skiff/internal/envvars"
	"github.com/skiff-sh/skiff/internal/kube"
	"github.com/skiff-sh/skiff/internal/nodestatus"
	"github.com/skiff-sh/skiff/internal/podsource"
	"github.com/skiff-sh/skiff/internal/podsource/apiserver"
	"github.com/skiff-sh/skiff/internal/server"
)

// apiCluster is the cluster side of a Skiff with an apiserver.
type apiCluster struct {
	k        *Kubelet
	client   kube.Interface
	reviews  kube.Interface // the kubelet API's TokenReviews and SubjectAccessReviews
	eventAPI kube.Interface // where Events go
	creds    *certs.Client  // nil: nothing to renew
	events   record.EventBroadcaster
	nodes    *nodestatus.Controller
	serving  *certs.Serving // serverTLSBootstrap's certificate; nil otherwise
	services *envvars.ServiceWatch
}

// newAPICluster builds the cluster side and sets the kubelet's recorder
// to send Events to the apiserver.
func newAPICluster(k *Kubelet, d Deps) (*apiCluster, error) {
	c := &apiCluster{k: k, client: d.Client, reviews: d.Reviews, creds: d.Creds, services: envvars.NewServiceWatch(d.Client.CoreV1())}
	if c.reviews == nil {
		c.reviews = d.Client
	}
	if c.eventAPI = d.Events; c.eventAPI == nil {
		c.eventAPI = d.Client
	}
	c.events, k.recorder = newEventRecorder(d.Config)
	kc := d.Config.Kubelet
	nodes, err := nodestatus.New(nodestatus.Config{
		Client:                d.Client,
		HeartbeatClient:       d.Heartbeat,
		NodeName:              d.Config.NodeName,
		NodeIPs:               splitIPs(d.Config.NodeIP),
		Kubelet:               kc,
		NodeLabels:            d.Config.NodeLabels,
		ExternalCloudProvider: d.Config.ExternalCloudProvider,
		RootDir:               d.Config.RootDir,
		Runtime:               d.CRI.Runtime,
		Images:                d.CRI.Images,
		KubeletVersion:        Version,
		Recorder:              k.recorder,
		// PLEG's health is part of the node's readiness, as upstream.
		HealthChecks: []nodestatus.HealthCheck{{Name: "PLEG", Check: func() error { return k.pleg.Healthy() }}},
		Pressure:     k.pressureConditions,
		// A node shutting down is not Ready, as upstream.
		NotReady: func() error { return k.shutdown.Status() },
		Extended: func() (v1.ResourceList, v1.ResourceList, []string) { return k.devices.Capacity() },
		// The CSI volumes needing attachment that are mounted or wanted.
		VolumesInUse: func(ctx context.Context) []v1.UniqueVolumeName { return k.csiDrivers.VolumesInUse(ctx) },
	})
	if err != nil {
		return nil, err
	}
	c.nodes = nodes
	if kc.ServerTLSBootstrap {
		c.serving, err = certs.NewServing(certs.ServingConfig{
			Client: d.Client, NodeName: d.Config.NodeName, CertDir: certDir(d.Config),
			CertFile: kc.TLSCertFile, KeyFile: kc.TLSPrivateKeyFile,
			RenewFailures: d.Config.Metrics.ServingCertRenewErrors,
			Addresses: func() []v1.NodeAddress {
				if n := nodes.Node(); n != nil {
					return n.Status.Addresses
				}
				return nil
			},
		})
		if err != nil {
			return nil, err
		}
		d.Config.Metrics.WatchServingCertificate(c.serving.Current)
	}
	if d.Creds != nil {
		d.Config.Metrics.WatchClientCertificate(d.Creds.Current)
	}
	return c, nil
}

func (c *apiCluster) standalone() bool  { return false }
func (c *apiCluster) sources() []string { return []string{podsource.APIServer} }

func (c *apiCluster) node() (*v1.Node, bool) { return c.nodes.Node(), true }

func (c *apiCluster) syncNodeStatus() { c.nodes.SyncNow() }

// env reads ConfigMaps and Secrets by GET (the Node authorizer allows
// those of bound pods) and Services from an informer.
func (c *apiCluster) env(hostIPs []string, allocatable func() v1.ResourceList) *envvars.Builder {
	return envvars.New(envvars.Config{
		HostIPs: hostIPs, NodeAllocatable: allocatable,
		Client: c.client.CoreV1(), Services: c.services.Lister(), ServicesSynced: c.services.HasSynced,
	})
}

func (c *apiCluster) pullSecrets() func(context.Context, *v1.Pod) []v1.Secret {
	return c.readPullSecrets
}

func (c *apiCluster) serverAuth(ac *server.AuthConfig, tc *server.TLSConfig, tlsBootstrap bool) error {
	ac.TokenReviews = c.reviews.AuthenticationV1()
	ac.SubjectAccessReviews = c.reviews.AuthorizationV1()
	if tlsBootstrap {
		tc.GetCertificate = c.serving.GetCertificate
	}
	return nil
}

func (c *apiCluster) run(ctx context.Context, spawn func(func(context.Context)), updates chan<- podsource.Update) error {
	c.events.StartRecordingToSink(&eventSink{Interface: c.eventAPI.CoreV1().Events("")})
	spawn(func(ctx context.Context) { <-ctx.Done(); c.events.Shutdown() })
	spawn(c.services.Run)
	if c.creds != nil {
		spawn(c.creds.Run)
	}
	spawn(c.nodes.Run)
	if c.serving != nil {
		spawn(c.serving.Run)
	}
	spawn(func(ctx context.Context) {
		apiserver.Run(ctx, apiserver.Config{Client: c.client.CoreV1(), NodeName: c.k.cfg.NodeName}, updates)
	})
	spawn(c.k.statuses.Run)
	return nil
}

// syncMirrorPod makes the static pod's mirror pod exist and match it: a
// mirror pod being deleted or made from an older manifest is replaced.
func (c *apiCluster) syncMirrorPod(ctx context.Context, pod *v1.Pod) error {
	hash := pod.Annotations[podsource.ConfigHashAnnotation]
	if mp, ok := c.k.pods.mirrorOf(pod); ok {
		if mp.DeletionTimestamp == nil && mp.Annotations[podsource.ConfigMirrorAnnotation] == hash {
			return nil
		}
		if err := c.deleteMirrorPod(ctx, mp); err != nil {
			return err
		}
	}
	node := c.nodes.Node()
	if node == nil {
		return nil // not registered yet; a later sync creates it
	}
	mp := pod.DeepCopy()
	mp.UID, mp.ResourceVersion, mp.Status = "", "", v1.PodStatus{}
	mp.Annotations[podsource.ConfigMirrorAnnotation] = hash
	controller := true
	mp.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: &controller,
	}}
	_, err := c.client.CoreV1().Pods(mp.Namespace).Create(ctx, mp, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create mirror pod %s/%s: %w", mp.Namespace, mp.Name, err)
	}
	klog.V(2).InfoS("Created mirror pod", "pod", klog.KObj(mp))
	return nil
}

func (c *apiCluster) deleteMirrorPods(ctx context.Context, mirrors []*v1.Pod) {
	for _, mp := range mirrors {
		if err := c.deleteMirrorPod(ctx, mp); err != nil {
			klog.ErrorS(err, "Failed to delete orphaned mirror pod", "pod", klog.KObj(mp))
		}
	}
}

// deleteMirrorPod deletes a mirror pod at once; it runs nothing.
func (c *apiCluster) deleteMirrorPod(ctx context.Context, mp *v1.Pod) error {
	err := c.client.CoreV1().Pods(mp.Namespace).Delete(ctx, mp.Name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64),
		Preconditions:      &metav1.Preconditions{UID: &mp.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete mirror pod %s/%s: %w", mp.Namespace, mp.Name, err)
	}
	klog.V(2).InfoS("Deleted mirror pod", "pod", klog.KObj(mp))
	return nil
}

// readPullSecrets reads a pod's imagePullSecrets (the Node authorizer
// lets a node read the secrets its pods reference). As upstream, a secret
// that cannot be read is left out with a warning event: the pull may
// still work without it.
func (c *apiCluster) readPullSecrets(ctx context.Context, pod *v1.Pod) []v1.Secret {
	var secrets []v1.Secret
	var failed []string
	for _, ref := range pod.Spec.ImagePullSecrets {
		if ref.Name == "" {
			continue // the API allows empty names; they mean nothing
		}
		s, err := c.client.CoreV1().Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			klog.InfoS("Unable to retrieve pull secret, the image pull may not succeed", "pod", klog.KObj(pod), "secret", ref.Name, "err", err)
			failed = append(failed, ref.Name)
			continue
		}
		secrets = append(secrets, *s)
	}
	if len(failed) > 0 {
		c.k.recorder.Eventf(pod, v1.EventTypeWarning, "FailedToRetrieveImagePullSecret",
			"Unable to retrieve some image pull secrets (%s); attempting to pull the image may not succeed.", strings.Join(failed, ", "))
	}
	return secrets
}
