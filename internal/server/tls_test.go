package server

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTLSSelfSigned(t *testing.T) {
	dir := t.TempDir()
	tc, reload, err := NewTLS(TLSConfig{CertDir: filepath.Join(dir, "pki"), Host: "node-1", MinVersion: "VersionTLS13"})
	if err != nil {
		t.Fatal(err)
	}
	if reload == nil || tc.MinVersion != tls.VersionTLS13 || tc.ClientAuth != tls.NoClientCert {
		t.Errorf("config: reload %v min %x clientAuth %v", reload != nil, tc.MinVersion, tc.ClientAuth)
	}
	cert, err := tc.GetCertificate(nil)
	if err != nil || cert.Leaf == nil || cert.Leaf.Subject.CommonName == "" || !strings.HasPrefix(cert.Leaf.Subject.CommonName, "node-1") {
		t.Fatalf("certificate: %v %+v", err, cert)
	}
	crt, err := os.ReadFile(filepath.Join(dir, "pki", "kubelet.crt"))
	if err != nil {
		t.Fatal(err)
	}
	// A second start keeps the pair it made.
	tc2, _, err := NewTLS(TLSConfig{CertDir: filepath.Join(dir, "pki"), Host: "node-1"})
	if err != nil {
		t.Fatal(err)
	}
	cert2, _ := tc2.GetCertificate(nil)
	again, _ := os.ReadFile(filepath.Join(dir, "pki", "kubelet.crt"))
	if string(again) != string(crt) || !cert2.Leaf.Equal(cert.Leaf) {
		t.Error("the self-signed pair was made anew")
	}
}

func TestTLSOptions(t *testing.T) {
	dir := t.TempDir()
	testCA(t, dir, "x")
	called := false
	get := func(*tls.ClientHelloInfo) (*tls.Certificate, error) { called = true; return &tls.Certificate{}, nil }
	tc, reload, err := NewTLS(TLSConfig{
		GetCertificate: get, ClientCAFile: filepath.Join(dir, "ca.crt"),
		CipherSuites: []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = tc.GetCertificate(nil)
	if !called || reload != nil || tc.ClientAuth != tls.RequestClientCert || tc.ClientCAs == nil ||
		len(tc.CipherSuites) != 1 || tc.CipherSuites[0] != tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 || tc.MinVersion != tls.VersionTLS12 {
		t.Errorf("config %+v", tc)
	}
	if _, _, err := NewTLS(TLSConfig{GetCertificate: get, CipherSuites: []string{"TLS_NOPE"}}); err == nil {
		t.Error("unknown cipher suite accepted")
	}
	if _, _, err := NewTLS(TLSConfig{CertFile: filepath.Join(dir, "missing.crt"), KeyFile: filepath.Join(dir, "missing.key")}); err == nil {
		t.Error("missing certificate files accepted")
	}
}
