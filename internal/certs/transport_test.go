package certs

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/skiff-sh/skiff/internal/kube"
)

// clientPair is a tls.Certificate for CN name signed by ca.
func clientPair(t *testing.T, ca *testCA, name string) *tls.Certificate {
	t.Helper()
	key := newKey(t)
	certPEM := ca.issue(t, pkix.Name{CommonName: name}, key.Public(), time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	c, err := tls.X509KeyPair(certPEM, keyPEM(t, key))
	if err != nil {
		t.Fatal(err)
	}
	return &c
}

// whoami is an HTTPS (HTTP/2, as the apiserver) server answering with the
// CN of the client certificate the connection was opened with.
func whoami(t *testing.T) *httptest.Server {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) == 0 {
			_, _ = io.WriteString(w, "anonymous")
			return
		}
		_, _ = io.WriteString(w, r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	srv.EnableHTTP2 = true
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func TestRotatingTransportFollowsTheCertificate(t *testing.T) {
	ca := newTestCA(t)
	srv := whoami(t)
	a, b := clientPair(t, ca, "system:node:a"), clientPair(t, ca, "system:node:b")
	var current atomic.Pointer[tls.Certificate]
	current.Store(a)

	rc := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{
		CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}),
	}}
	rotating, closeAll, err := rotatingConfig(rc, current.Load)
	if err != nil {
		t.Fatal(err)
	}
	// client-go accepts it (no TLS options beside the custom transport).
	if _, err := kube.NewForConfig(rotating); err != nil {
		t.Fatalf("clientset from the rotating config: %v", err)
	}
	hc, err := rest.HTTPClientFor(rotating)
	if err != nil {
		t.Fatal(err)
	}
	get := func() string {
		t.Helper()
		resp, err := hc.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.ProtoMajor != 2 {
			t.Errorf("protocol %s, want HTTP/2 as with the apiserver", resp.Proto)
		}
		return string(body)
	}
	r := newConnRotator(current.Load, closeAll)

	if got := get(); got != "system:node:a" {
		t.Fatalf("first request as %q", got)
	}
	if r.check() {
		t.Error("check closed connections without a rotation")
	}
	current.Store(b)
	// The open connection keeps the identity of its handshake: this is why
	// the rotator must close it.
	if got := get(); got != "system:node:a" {
		t.Fatalf("before the rotator ran: %q (the test no longer shows the stale connection)", got)
	}
	if !r.check() {
		t.Fatal("check did not see the rotation")
	}
	if got := get(); got != "system:node:b" {
		t.Errorf("after rotation the server saw %q, want system:node:b", got)
	}
	if r.check() {
		t.Error("second check closed connections again")
	}
	// Losing the certificate (nil) closes nothing: a request still goes out.
	current.Store(nil)
	if r.check() {
		t.Error("check closed connections for a missing certificate")
	}
	closeAll()
	if got := get(); got != "anonymous" {
		t.Errorf("without a certificate the server saw %q", got)
	}
}

func TestRotatingConfigRefusesCustomTransport(t *testing.T) {
	rc := &rest.Config{Host: "https://127.0.0.1:1", Transport: http.DefaultTransport}
	if _, _, err := rotatingConfig(rc, func() *tls.Certificate { return nil }); err == nil {
		t.Error("want an error for a config with its own transport")
	}
}
