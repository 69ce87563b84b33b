package metrics

import (
	"crypto/tls"
	"math"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// certTTL is upstream's kubelet_certificate_manager_{client,server}_ttl_seconds:
// the seconds until the current certificate expires, negative once it
// has, +Inf while there is none (no rotation, or not issued yet). The
// kubelet mixin alerts on it (KubeletClientCertificateExpiration,
// KubeletServerCertificateExpiration).
type certTTL struct {
	current atomic.Pointer[func() *tls.Certificate]
	now     func() time.Time
}

func (c *certTTL) collector(name, help string) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Subsystem: subsystem, Name: name, Help: help}, c.seconds)
}

func (c *certTTL) seconds() float64 {
	if f := c.current.Load(); f != nil {
		if cert := (*f)(); cert != nil && cert.Leaf != nil {
			return math.Trunc(cert.Leaf.NotAfter.Sub(c.now()).Seconds())
		}
	}
	return math.Inf(1)
}

func (r *Registry) certCollectors() []prometheus.Collector {
	r.clientCert.now, r.servingCert.now = time.Now, time.Now
	// Upstream names the two differently.
	r.ClientCertRenewErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: subsystem, Subsystem: "certificate_manager", Name: "client_expiration_renew_errors",
		Help: "Counter of certificate renewal errors.",
	})
	r.ServingCertRenewErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Subsystem: subsystem, Name: "server_expiration_renew_errors", Help: "Counter of certificate renewal errors.",
	})
	return []prometheus.Collector{r.ClientCertRenewErrors, r.ServingCertRenewErrors,
		r.clientCert.collector("certificate_manager_client_ttl_seconds",
			"Gauge of the TTL (time-to-live) of the Kubelet's client certificate. The value is in seconds until certificate expiry (negative if already expired). If client certificate is invalid or unused, the value will be +INF."),
		r.servingCert.collector("certificate_manager_server_ttl_seconds",
			"Gauge of the shortest TTL (time-to-live) of the Kubelet's serving certificate. The value is in seconds until certificate expiry (negative if already expired). If serving certificate is invalid or unused, the value will be +INF."),
	}
}

// WatchClientCertificate reports the TTL of the rotated client
// certificate current returns.
func (r *Registry) WatchClientCertificate(current func() *tls.Certificate) {
	r.clientCert.current.Store(&current)
}

// WatchServingCertificate reports the TTL of the serving certificate
// current returns (serverTLSBootstrap).
func (r *Registry) WatchServingCertificate(current func() *tls.Certificate) {
	r.servingCert.current.Store(&current)
}
