package server

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certutil "k8s.io/client-go/util/cert"
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

// tlsCertFile and tlsPrivateKeyFile are reloaded when they change; a pair
// that does not load leaves the one before in use.
func TestTLSCertificateFilesReload(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	write := func(host string) {
		t.Helper()
		cert, key, err := certutil.GenerateSelfSignedCertKey(host, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(keyFile, key, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(certFile, cert, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("first")
	tc, reload, err := NewTLS(TLSConfig{CertFile: certFile, KeyFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { reload(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	host := func() string {
		c, err := tc.GetCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		return c.Leaf.Subject.CommonName
	}
	if h := host(); !strings.HasPrefix(h, "first") {
		t.Fatalf("serving %q", h)
	}
	write("second")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.HasPrefix(host(), "second") {
		if time.Now().After(deadline) {
			t.Fatalf("still serving %q after the files changed", host())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := os.WriteFile(certFile, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if h := host(); !strings.HasPrefix(h, "second") {
		t.Errorf("after a bad certificate file: serving %q", h)
	}
}
