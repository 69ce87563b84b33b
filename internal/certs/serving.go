package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/certificate"
	"k8s.io/klog/v2"
)

// servingPairPrefix names the serving pair in the cert directory.
const servingPairPrefix = "kubelet-server"

// errNoServingCertificate is what TLS clients get before the serving CSR
// is approved and signed.
var errNoServingCertificate = errors.New("no serving certificate available for the kubelet yet: its kubernetes.io/kubelet-serving CSR is not approved and signed")

// ServingConfig configures the serving certificate (serverTLSBootstrap).
type ServingConfig struct {
	Client   CSRClient
	NodeName string
	CertDir  string
	// CertFile and KeyFile (tlsCertFile, tlsPrivateKeyFile) are the
	// initial pair when the cert directory has none yet.
	CertFile, KeyFile string
	// Addresses are the Node's current addresses; the certificate's SANs
	// follow them. None yet (before registration) means no request yet.
	Addresses func() []v1.NodeAddress
	// RenewFailures counts failed renewals; nil: not counted.
	RenewFailures certificate.Counter
}

// Serving keeps the kubelet's serving certificate: requested through a
// kubernetes.io/kubelet-serving CSR, which the cluster's operator (not
// the controller-manager) approves, and renewed like the client's.
type Serving struct {
	m certificate.Manager
}

// NewServing sets up the serving certificate manager; Run starts it.
func NewServing(cfg ServingConfig) (*Serving, error) {
	if err := os.MkdirAll(cfg.CertDir, 0o700); err != nil {
		return nil, fmt.Errorf("create certificate directory: %w", err)
	}
	store, err := certificate.NewFileStore(servingPairPrefix, cfg.CertDir, cfg.CertDir, cfg.CertFile, cfg.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("serving certificate store: %w", err)
	}
	m, err := certificate.NewManager(&certificate.Config{
		ClientsetFn:             func(*tls.Certificate) (kubernetes.Interface, error) { return newCSRClientset(cfg.Client), nil },
		GetTemplate:             func() *x509.CertificateRequest { return servingTemplate(cfg.NodeName, cfg.Addresses()) },
		SignerName:              certificatesv1.KubeletServingSignerName,
		GetUsages:               certificate.DefaultKubeletServingGetUsages,
		CertificateStore:        store,
		Name:                    "kubelet serving",
		CertificateRenewFailure: cfg.RenewFailures,
	})
	if err != nil {
		return nil, fmt.Errorf("serving certificate manager: %w", err)
	}
	return &Serving{m: m}, nil
}

// Run requests and renews the serving certificate until ctx ends.
func (s *Serving) Run(ctx context.Context) {
	klog.InfoS("Starting serving certificate rotation (serverTLSBootstrap)")
	s.m.Start()
	<-ctx.Done()
	s.m.Stop()
}

// Current is the serving certificate, nil before one is signed.
func (s *Serving) Current() *tls.Certificate { return s.m.Current() }

// GetCertificate is a tls.Config.GetCertificate: the current serving
// certificate, or an error (and so a failed handshake) before there is one.
func (s *Serving) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := s.m.Current(); c != nil {
		return c, nil
	}
	return nil, errNoServingCertificate
}

// servingTemplate is the serving CSR for the node's addresses: host and
// DNS names and IPs as SANs, deduplicated and sorted so an unchanged
// address list gives an identical request. Without an IP there is no
// request, as upstream (a certificate without one is of no use to the
// apiserver, which dials nodes by IP here).
func servingTemplate(nodeName string, addrs []v1.NodeAddress) *x509.CertificateRequest {
	dns, ips := map[string]bool{}, map[string]net.IP{}
	for _, a := range addrs {
		if a.Address == "" {
			continue
		}
		ip := net.ParseIP(a.Address)
		switch a.Type {
		case v1.NodeHostName, v1.NodeInternalDNS, v1.NodeExternalDNS:
			if ip != nil && a.Type == v1.NodeHostName {
				ips[ip.String()] = ip
			} else if ip == nil {
				dns[a.Address] = true
			}
		case v1.NodeInternalIP, v1.NodeExternalIP:
			if ip != nil {
				ips[ip.String()] = ip
			}
		}
	}
	if len(ips) == 0 {
		return nil
	}
	t := &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{nodesGroup}}}
	for n := range dns {
		t.DNSNames = append(t.DNSNames, n)
	}
	sort.Strings(t.DNSNames)
	keys := make([]string, 0, len(ips))
	for k := range ips {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.IPAddresses = append(t.IPAddresses, ips[k])
	}
	return t
}
