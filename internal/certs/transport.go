package certs

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/connrotation"
	"k8s.io/klog/v2"
)

// rotatingConfig returns a copy of rc whose transport presents current()
// as the client certificate at every TLS handshake, and a function that
// closes every connection it opened. The copy carries no TLS files or data
// of its own: client-go refuses those next to a custom transport.
func rotatingConfig(rc *rest.Config, current func() *tls.Certificate) (*rest.Config, func(), error) {
	if rc.Transport != nil || rc.WrapTransport != nil || rc.Dial != nil {
		return nil, nil, fmt.Errorf("kubeconfig already has a custom transport or dialer")
	}
	tlsCfg, err := rest.TLSConfigFor(rc)
	if err != nil {
		return nil, nil, fmt.Errorf("TLS configuration: %w", err)
	}
	if tlsCfg == nil { // plain http: nothing to rotate, but keep one code path
		tlsCfg = &tls.Config{}
	}
	tlsCfg.Certificates = nil
	tlsCfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if c := current(); c != nil {
			return c, nil
		}
		// No certificate: the handshake goes on and the apiserver sees an
		// anonymous client, which is what it should see.
		return &tls.Certificate{}, nil
	}
	d := connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	out := rest.AnonymousClientConfig(rc)
	out.TLSClientConfig = rest.TLSClientConfig{}
	out.Transport = utilnet.SetTransportDefaults(&http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     tlsCfg,
		MaxIdleConnsPerHost: 25,
		DialContext:         d.DialContext,
	})
	return out, d.CloseAll, nil
}

// connRotator closes the client's connections when the certificate
// changes: TLS presents a client certificate only at the handshake, so
// open (HTTP/2, long-lived) connections would keep the old identity until
// it expires. Requests in flight fail once and are retried by their
// callers (informers re-list and re-watch, the node status and Lease
// updates retry on their next tick).
type connRotator struct {
	current  func() *tls.Certificate
	closeAll func()

	mu            sync.Mutex
	last          *tls.Certificate
	expiredLogged *tls.Certificate
}

func newConnRotator(current func() *tls.Certificate, closeAll func()) *connRotator {
	return &connRotator{current: current, closeAll: closeAll, last: current()}
}

// check closes all connections if the certificate changed since the last
// check, and reports whether it did.
func (r *connRotator) check() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.current()
	if c != nil && c.Leaf != nil && time.Now().After(c.Leaf.NotAfter) && c != r.expiredLogged {
		// Renewal kept failing: the apiserver now refuses Skiff. A restart
		// with a bootstrap kubeconfig bootstraps a new certificate.
		r.expiredLogged = c
		klog.ErrorS(nil, "The client certificate has expired and could not be renewed; the apiserver will refuse Skiff until it is restarted with valid or bootstrap credentials",
			"notAfter", c.Leaf.NotAfter, "subject", c.Leaf.Subject.String())
	}
	if c == nil || c == r.last {
		return false
	}
	r.last = c
	attrs := []any{}
	if c.Leaf != nil {
		attrs = append(attrs, "subject", c.Leaf.Subject.String(), "notAfter", c.Leaf.NotAfter, "serial", c.Leaf.SerialNumber.String())
	}
	klog.InfoS("Client certificate rotated; closing connections to the apiserver so new ones present it", attrs...)
	r.closeAll()
	return true
}

func (r *connRotator) run(ctx context.Context, period time.Duration) {
	wait.UntilWithContext(ctx, func(context.Context) { r.check() }, period)
}
