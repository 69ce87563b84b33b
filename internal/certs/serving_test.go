package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestServingTemplate(t *testing.T) {
	tests := []struct {
		name  string
		addrs []v1.NodeAddress
		nilT  bool
		dns   []string
		ips   []string
	}{
		{name: "no addresses yet", nilT: true},
		{name: "hostname only: no IP, no request", addrs: []v1.NodeAddress{{Type: v1.NodeHostName, Address: "n1"}}, nilT: true},
		{
			name: "hostname and IPs, deduplicated and sorted",
			addrs: []v1.NodeAddress{
				{Type: v1.NodeInternalIP, Address: "10.0.0.9"}, {Type: v1.NodeHostName, Address: "n1"},
				{Type: v1.NodeInternalIP, Address: "10.0.0.2"}, {Type: v1.NodeExternalIP, Address: "10.0.0.9"},
				{Type: v1.NodeInternalIP, Address: "fd00::1"}, {Type: v1.NodeInternalDNS, Address: "n1.example"},
				{Type: v1.NodeInternalIP, Address: ""},
			},
			dns: []string{"n1", "n1.example"}, ips: []string{"10.0.0.2", "10.0.0.9", "fd00::1"},
		},
		{
			name:  "a hostname that is an IP is an IP SAN",
			addrs: []v1.NodeAddress{{Type: v1.NodeHostName, Address: "192.168.1.5"}},
			ips:   []string{"192.168.1.5"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := servingTemplate("n1", tt.addrs)
			if tt.nilT {
				if got != nil {
					t.Fatalf("template %+v, want none", got)
				}
				return
			}
			if got == nil {
				t.Fatal("no template")
			}
			if got.Subject.CommonName != "system:node:n1" || !slices.Equal(got.Subject.Organization, []string{"system:nodes"}) {
				t.Errorf("subject %v", got.Subject)
			}
			var ips []string
			for _, ip := range got.IPAddresses {
				ips = append(ips, ip.String())
			}
			if !slices.Equal(got.DNSNames, tt.dns) || !slices.Equal(ips, tt.ips) {
				t.Errorf("SANs dns %v ips %v, want %v %v", got.DNSNames, ips, tt.dns, tt.ips)
			}
		})
	}
	// Same addresses, same request: the manager compares templates to
	// decide whether the addresses changed.
	a := servingTemplate("n1", []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}})
	b := servingTemplate("n1", []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}})
	if !a.IPAddresses[0].Equal(b.IPAddresses[0]) || !slices.EqualFunc(a.IPAddresses, b.IPAddresses, func(x, y net.IP) bool { return string(x) == string(y) }) {
		t.Error("equal addresses give different templates")
	}
}

func TestServingGetCertificateBeforeSigning(t *testing.T) {
	s, err := NewServing(ServingConfig{
		Client: fake.NewClientset(), NodeName: "n1", CertDir: t.TempDir(),
		Addresses: func() []v1.NodeAddress { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.GetCertificate(&tls.ClientHelloInfo{})
	if c != nil || !errors.Is(err, errNoServingCertificate) {
		t.Errorf("GetCertificate = %v, %v; want no certificate yet", c, err)
	}
}

func TestServingRequestsAKubeletServingCertificate(t *testing.T) {
	ca := newTestCA(t)
	client, seen := fakeSigner(t, ca, false)
	var addrs atomic.Pointer[[]v1.NodeAddress]
	addrs.Store(&[]v1.NodeAddress{})
	s, err := NewServing(ServingConfig{
		Client: client, NodeName: "n1", CertDir: t.TempDir(),
		Addresses: func() []v1.NodeAddress { return *addrs.Load() },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	time.Sleep(1500 * time.Millisecond) // no IP yet: nothing must be requested
	if n := len(seen()); n != 0 {
		t.Fatalf("%d CSRs before the node had an address", n)
	}
	addrs.Store(&[]v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.1.2.3"}, {Type: v1.NodeHostName, Address: "n1"}})
	deadline := time.Now().Add(20 * time.Second)
	for s.Current() == nil && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	c, err := s.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatalf("no serving certificate: %v", err)
	}
	if c.Leaf == nil || c.Leaf.Subject.CommonName != "system:node:n1" {
		t.Errorf("certificate %+v", c.Leaf)
	}
	csr := seen()[0]
	if csr.Spec.SignerName != certificatesv1.KubeletServingSignerName || !slices.Contains(csr.Spec.Usages, certificatesv1.UsageServerAuth) {
		t.Errorf("CSR signer %q usages %v", csr.Spec.SignerName, csr.Spec.Usages)
	}
	req, err := parseCSRRequest(csr.Spec.Request)
	if err != nil {
		t.Fatal(err)
	}
	if len(req.IPAddresses) != 1 || req.IPAddresses[0].String() != "10.1.2.3" || !slices.Equal(req.DNSNames, []string{"n1"}) {
		t.Errorf("CSR SANs %v %v", req.IPAddresses, req.DNSNames)
	}
}

func parseCSRRequest(b []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, errors.New("not PEM")
	}
	return x509.ParseCertificateRequest(block.Bytes)
}

// countFailures counts what the certificate manager reports as failed
// renewals.
type countFailures struct{ n atomic.Int64 }

func (c *countFailures) Inc() { c.n.Add(1) }

// A renewal the apiserver refuses is counted (upstream's
// kubelet_server_expiration_renew_errors).
func TestServingCountsRenewalFailures(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("create", "certificatesigningrequests", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("refused")
	})
	failures := &countFailures{}
	s, err := NewServing(ServingConfig{
		Client: client, NodeName: "n1", CertDir: t.TempDir(), RenewFailures: failures,
		Addresses: func() []v1.NodeAddress { return []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.1.2.3"}} },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(20 * time.Second)
	for failures.n.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if failures.n.Load() == 0 {
		t.Fatal("a refused renewal was not counted")
	}
	if s.Current() != nil {
		t.Error("a certificate without a signed CSR")
	}
}
