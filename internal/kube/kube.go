// Package kube is Skiff's apiserver client: the typed clients of the eight
// API groups Skiff calls, and no others.
//
// client-go's kubernetes.Clientset holds a client for every API group
// (about 50), and kubernetes.NewForConfig makes the linker keep all of
// them, with their apply configurations; informers.SharedInformerFactory
// does the same for every group's informers and listers. Building only
// these clients, and informers per type (NewInformer), took Skiff's
// binary from 94.1 to 82.9 MB and its text from 29.7 to 26.6 MB (go 1.26,
// client-go v0.34.4). The binary's mapped text and tables are most of
// Skiff's resident memory, so this is memory, not just disk.
//
// Packages take the typed interface they call (corev1client.CoreV1Interface
// and so on), not this one; tests pass the typed clients of client-go's
// fake clientset, which also satisfies Interface.
package kube

import (
	"fmt"
	"net/http"

	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	certificatesv1 "k8s.io/client-go/kubernetes/typed/certificates/v1"
	certificatesv1beta1 "k8s.io/client-go/kubernetes/typed/certificates/v1beta1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	resourcev1 "k8s.io/client-go/kubernetes/typed/resource/v1"
	storagev1 "k8s.io/client-go/kubernetes/typed/storage/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// Interface is the part of client-go's kubernetes.Interface that Skiff
// uses: pods, nodes, events, secrets, configmaps, services, tokens, claims
// and PersistentVolumes (core), the node Lease (coordination), CSRs
// (certificates/v1, and v1beta1 where client-go falls back to it) and
// ClusterTrustBundles (certificates/v1beta1), the kubelet API's webhooks
// (TokenReview, SubjectAccessReview), CSINodes (storage/v1) and
// ResourceClaims (resource/v1).
type Interface interface {
	CoreV1() corev1.CoreV1Interface
	CoordinationV1() coordinationv1.CoordinationV1Interface
	CertificatesV1() certificatesv1.CertificatesV1Interface
	CertificatesV1beta1() certificatesv1beta1.CertificatesV1beta1Interface
	AuthenticationV1() authenticationv1.AuthenticationV1Interface
	AuthorizationV1() authorizationv1.AuthorizationV1Interface
	StorageV1() storagev1.StorageV1Interface
	ResourceV1() resourcev1.ResourceV1Interface
}

// Clientset implements Interface with client-go's typed clients.
type Clientset struct {
	core                *corev1.CoreV1Client
	coordination        *coordinationv1.CoordinationV1Client
	certificates        *certificatesv1.CertificatesV1Client
	certificatesV1beta1 *certificatesv1beta1.CertificatesV1beta1Client
	authentication      *authenticationv1.AuthenticationV1Client
	authorization       *authorizationv1.AuthorizationV1Client
	storage             *storagev1.StorageV1Client
	resource            *resourcev1.ResourceV1Client
}

var _ Interface = (*Clientset)(nil)

func (c *Clientset) CoreV1() corev1.CoreV1Interface { return c.core }
func (c *Clientset) CoordinationV1() coordinationv1.CoordinationV1Interface {
	return c.coordination
}
func (c *Clientset) CertificatesV1() certificatesv1.CertificatesV1Interface {
	return c.certificates
}
func (c *Clientset) CertificatesV1beta1() certificatesv1beta1.CertificatesV1beta1Interface {
	return c.certificatesV1beta1
}
func (c *Clientset) AuthenticationV1() authenticationv1.AuthenticationV1Interface {
	return c.authentication
}
func (c *Clientset) AuthorizationV1() authorizationv1.AuthorizationV1Interface {
	return c.authorization
}

func (c *Clientset) StorageV1() storagev1.StorageV1Interface { return c.storage }

func (c *Clientset) ResourceV1() resourcev1.ResourceV1Interface { return c.resource }

// NewForConfig is kubernetes.NewForConfig for these groups: one HTTP
// client (and so one connection pool and one rotating transport) and one
// QPS/burst rate limiter shared by all of them, as the full clientset
// shares them.
func NewForConfig(c *rest.Config) (*Clientset, error) {
	cfg := *c
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	httpClient, err := rest.HTTPClientFor(&cfg)
	if err != nil {
		return nil, err
	}
	return NewForConfigAndClient(&cfg, httpClient)
}

// NewForConfigAndClient is kubernetes.NewForConfigAndClient for these
// groups.
func NewForConfigAndClient(c *rest.Config, httpClient *http.Client) (*Clientset, error) {
	cfg := *c
	if cfg.RateLimiter == nil && cfg.QPS > 0 {
		if cfg.Burst <= 0 {
			return nil, fmt.Errorf("burst is required to be greater than 0 when RateLimiter is not set and QPS is set to greater than 0")
		}
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}
	var cs Clientset
	var err error
	if cs.core, err = corev1.NewForConfigAndClient(&cfg, httpClient); err != nil {
		return nil, err
	}
	if cs.coordination, err = coordinationv1.NewForConfigAndClient(&cfg, httpClient); err != nil {
		return nil, err
	}
	if cs.certificates, err = certificatesv1.NewForConfigAndClient(&cfg, httpClient); err != nil {
		return nil, err
	}
	if cs.certificatesV1beta1, err = certificatesv1beta1.NewForConfigAndClient(&cfg, httpClient); err != nil {
		return nil, err
	}
	if cs.authentication, err = authenticationv1.NewForConfigAndClient(&cfg, httpClient); err != nil {
		return nil, err
	}
	if cs.authorization, err = authorizationv1.NewForConfigAndClient(&cfg, httpClient); err != nil {
		return nil, err
	}
	if cs.storage, err = storagev1.NewForConfigAndClient(&cfg, httpClient); err != nil {
		return nil, err
	}
	if cs.resource, err = resourcev1.NewForConfigAndClient(&cfg, httpClient); err != nil {
		return nil, err
	}
	return &cs, nil
}
