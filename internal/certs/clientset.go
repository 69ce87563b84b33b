package certs

import (
	"net"
	"time"

	"k8s.io/client-go/kubernetes"
	certificatesv1 "k8s.io/client-go/kubernetes/typed/certificates/v1"
	certificatesv1beta1 "k8s.io/client-go/kubernetes/typed/certificates/v1beta1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/connrotation"

	"github.com/skiff-sh/skiff/internal/kube"
)

// CSRClient is what filing and watching certificate signing requests
// takes: certificates.k8s.io/v1, and v1beta1, which client-go's csr
// package falls back to when an apiserver does not serve v1.
type CSRClient interface {
	CertificatesV1() certificatesv1.CertificatesV1Interface
	CertificatesV1beta1() certificatesv1beta1.CertificatesV1beta1Interface
}

// csrClientset is the kubernetes.Interface that client-go's
// util/certificate (Config.ClientsetFn) and util/certificate/csr
// (RequestCertificateWithContext, WaitForCertificate) take, although of
// the whole clientset they call only CertificatesV1() and
// CertificatesV1beta1() (client-go v0.34.4: certificate_manager.go hands
// the clientset to the csr package only, and csr.go's create, get and
// WaitForCertificate call those two). Building a real kubernetes.Clientset
// for them would link the clients of every API group into Skiff (see
// package kube); here the embedded Interface is nil, so any other method
// would panic. TestCSRClientsetV1beta1Fallback runs client-go's CSR code
// through it, the v1beta1 fallback included; check csr.go again when
// client-go is upgraded.
type csrClientset struct {
	kubernetes.Interface // nil: not called by client-go's CSR code
	c                    CSRClient
}

func newCSRClientset(c CSRClient) kubernetes.Interface { return csrClientset{c: c} }

func (c csrClientset) CertificatesV1() certificatesv1.CertificatesV1Interface {
	return c.c.CertificatesV1()
}

func (c csrClientset) CertificatesV1beta1() certificatesv1beta1.CertificatesV1beta1Interface {
	return c.c.CertificatesV1beta1()
}

// newCSRClientsetForConfig is newCSRClientset of a client built from rc.
func newCSRClientsetForConfig(rc *rest.Config) (kubernetes.Interface, error) {
	c, err := kube.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return newCSRClientset(c), nil
}

// newReleasableCSRClientset is newCSRClientsetForConfig with connections
// of its own, and a function that closes all of them. client-go shares
// transports between equal configs and keeps idle connections for 90 s,
// and the CSR watch's stream may still be open (its informer winds down
// on its own) when the certificate is issued: closing only the idle
// connections then left one authenticated by the bootstrap token open.
func newReleasableCSRClientset(rc *rest.Config) (kubernetes.Interface, func(), error) {
	dialer := connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	rc = rest.CopyConfig(rc)
	rc.Dial = dialer.DialContext // a config with its own dialer gets a transport of its own
	c, err := kube.NewForConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	return newCSRClientset(c), dialer.CloseAll, nil
}
