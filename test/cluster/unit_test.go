package cluster

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

func TestParseStat(t *testing.T) {
	st, err := parseStat([]byte("4242 (a (b) c) S 1 4242 4242 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 987654 1000 100\n"))
	if err != nil {
		t.Fatal(err)
	}
	if st.state != 'S' || st.ppid != 1 || st.pgrp != 4242 || st.startTime != 987654 {
		t.Errorf("parseStat = %+v", st)
	}
	self, err := readStat(os.Getpid())
	if err != nil || self.state == 'Z' || self.startTime == 0 {
		t.Errorf("readStat(self) = %+v, %v", self, err)
	}
}

func TestRandomToken(t *testing.T) {
	re := regexp.MustCompile(`^[a-z0-9]{16}$`)
	seen := map[string]bool{}
	for range 100 {
		s, err := randomToken(16)
		if err != nil || !re.MatchString(s) || seen[s] {
			t.Fatalf("randomToken = %q, %v", s, err)
		}
		seen[s] = true
	}
}

func TestPKIAndNodeKubeconfig(t *testing.T) {
	dir := t.TempDir()
	c := &Cluster{opts: Options{Dir: dir, AdvertiseAddress: "192.0.2.7", ServiceCIDR: "10.96.0.0/16"}, apiURL: "https://192.0.2.7:6443"}
	if err := c.writePKI(); err != nil {
		t.Fatal(err)
	}
	ca, err := loadKeyPair(filepath.Join(dir, "pki", "ca"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	srv, err := loadKeyPair(filepath.Join(dir, "pki", "apiserver"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"192.0.2.7", "127.0.0.1", "10.96.0.1", "localhost", "kubernetes.default.svc.cluster.local"} {
		if _, err := srv.cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: name}); err != nil {
			t.Errorf("serving certificate for %s: %v", name, err)
		}
	}

	// A second writePKI keeps the CA.
	if err := c.writePKI(); err != nil {
		t.Fatal(err)
	}
	ca2, err := loadKeyPair(filepath.Join(dir, "pki", "ca"))
	if err != nil || !ca2.cert.Equal(ca.cert) {
		t.Fatalf("CA changed on a second writePKI (%v)", err)
	}

	kc := filepath.Join(dir, "node.kubeconfig")
	if err := c.NodeKubeconfig("n1", kc); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://192.0.2.7:6443" {
		t.Errorf("host %s", cfg.Host)
	}
	kp, err := parsePrivateKeyPEM(cfg.KeyData)
	if err != nil || kp == nil {
		t.Fatal(err)
	}
	cert, err := loadCertPEM(cfg.CertData)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "system:node:n1" || len(cert.Subject.Organization) != 1 || cert.Subject.Organization[0] != "system:nodes" {
		t.Errorf("subject %v", cert.Subject)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Error(err)
	}
}

func TestDefaultRouteIPv4(t *testing.T) {
	ip, err := defaultRouteIPv4()
	if err != nil {
		t.Skip(err)
	}
	if ip.IsLoopback() || ip.To4() == nil {
		t.Errorf("defaultRouteIPv4 = %v", ip)
	}
}
