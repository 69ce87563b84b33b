package certs

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	certificatesv1beta1 "k8s.io/api/certificates/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestCSRClientsetV1beta1Fallback runs a bootstrap (client-go's
// csr.RequestCertificateWithContext and WaitForCertificate) through
// csrClientset against an apiserver without certificates.k8s.io/v1: the
// CSR is created, listed and watched as v1beta1. Any clientset method
// besides CertificatesV1 and CertificatesV1beta1 would panic on the nil
// kubernetes.Interface inside csrClientset.
func TestCSRClientsetV1beta1Fallback(t *testing.T) {
	ca := newTestCA(t)
	client := fake.NewClientset()
	var mu sync.Mutex
	var v1Calls, v1beta1Creates int
	client.PrependReactor("*", "certificatesigningrequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if a.GetResource().Version == "v1" {
			v1Calls++
			return true, nil, apierrors.NewNotFound(a.GetResource().GroupResource(), "")
		}
		if c, ok := a.(k8stesting.CreateAction); ok {
			v1beta1Creates++
			csr := c.GetObject().(*certificatesv1beta1.CertificateSigningRequest)
			csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1beta1.CertificateSigningRequestCondition{
				Type: certificatesv1beta1.CertificateApproved, Reason: "AutoApproved", Status: "True"})
			csr.Status.Certificate = ca.signCSR(t, csr.Spec.Request)
		}
		return false, nil, nil
	})
	dir := t.TempDir()
	bootstrap := filepath.Join(dir, "bootstrap.kubeconfig")
	writeTestKubeconfig(t, bootstrap, "https://10.0.0.1:6443", ca.pem, &clientcmdapi.AuthInfo{Token: "abcdef.0123456789abcdef"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := Bootstrap(ctx, BootstrapConfig{
		Kubeconfig: filepath.Join(dir, "kubelet.kubeconfig"), BootstrapKubeconfig: bootstrap,
		CertDir: filepath.Join(dir, "pki"), NodeName: "n1", Client: client,
	})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if v1Calls == 0 || v1beta1Creates != 1 {
		t.Errorf("%d v1 calls and %d v1beta1 creates: want the v1 attempts, then one v1beta1 CSR", v1Calls, v1beta1Creates)
	}
	if need, reason, err := NeedsBootstrap(filepath.Join(dir, "kubelet.kubeconfig"), time.Now()); need || err != nil {
		t.Errorf("after bootstrap: need %v (%s) err %v", need, reason, err)
	}
}

// Releasing the bootstrap client closes its connections, a watch's that
// is still streaming too: none authenticated by the bootstrap token stays
// open after the bootstrap.
func TestReleaseClosesStreamingConnections(t *testing.T) {
	var mu sync.Mutex
	open := map[net.Conn]bool{}
	watching := make(chan struct{}, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case watching <- struct{}{}:
		default:
		}
		<-r.Context().Done() // a watch that sends nothing until it is cut
	}))
	srv.EnableHTTP2 = true
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		mu.Lock()
		defer mu.Unlock()
		switch s {
		case http.StateNew:
			open[c] = true
		case http.StateClosed, http.StateHijacked:
			delete(open, c)
		}
	}
	srv.StartTLS()
	defer srv.Close()

	rc := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}, BearerToken: "abcdef.0123456789abcdef"}
	client, release, err := newReleasableCSRClientset(rc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		if w, err := client.CertificatesV1().CertificateSigningRequests().Watch(ctx, metav1.ListOptions{}); err == nil {
			for range w.ResultChan() {
			}
		}
	}()
	<-watching
	release()
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(open)
		mu.Unlock()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still open 10 s after release", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
