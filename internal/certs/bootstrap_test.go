package certs

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func TestNeedsBootstrap(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	now := time.Now()
	key := newKey(t)
	node := pkix.Name{CommonName: "system:node:n1", Organization: []string{"system:nodes"}}
	valid := ca.issue(t, node, key.Public(), now.Add(-time.Hour), now.Add(time.Hour))
	expired := ca.issue(t, node, key.Public(), now.Add(-2*time.Hour), now.Add(-time.Minute))
	pair := func(name string, cert []byte) string {
		return writeFile(t, dir, name, append(append([]byte{}, cert...), keyPEM(t, key)...))
	}
	validPair, expiredPair := pair("valid.pem", valid), pair("expired.pem", expired)

	kubeconfig := func(name string, auth *clientcmdapi.AuthInfo) string {
		p := filepath.Join(dir, name)
		writeTestKubeconfig(t, p, "https://127.0.0.1:6443", ca.pem, auth)
		return p
	}
	tests := []struct {
		name   string
		path   string
		need   bool
		reason string
	}{
		{"missing file", filepath.Join(dir, "nope.kubeconfig"), true, "does not exist"},
		{"valid certificate file", kubeconfig("valid.kubeconfig", &clientcmdapi.AuthInfo{ClientCertificate: validPair, ClientKey: validPair}), false, ""},
		{"valid embedded certificate", kubeconfig("embedded.kubeconfig", &clientcmdapi.AuthInfo{ClientCertificateData: valid, ClientKeyData: keyPEM(t, key)}), false, ""},
		{"expired certificate", kubeconfig("expired.kubeconfig", &clientcmdapi.AuthInfo{ClientCertificate: expiredPair, ClientKey: expiredPair}), true, "expired at"},
		{"certificate file gone", kubeconfig("gone.kubeconfig", &clientcmdapi.AuthInfo{ClientCertificate: filepath.Join(dir, "gone.pem"), ClientKey: filepath.Join(dir, "gone.pem")}), true, "unable to read client-cert"},
		{"token, no certificate", kubeconfig("token.kubeconfig", &clientcmdapi.AuthInfo{Token: "abc.def"}), true, "no client certificate"},
		{"garbage", writeFile(t, dir, "garbage.kubeconfig", []byte("{{{ not yaml")), true, "invalid"},
		{"certificate is garbage", kubeconfig("bad.kubeconfig", &clientcmdapi.AuthInfo{ClientCertificateData: []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), ClientKeyData: keyPEM(t, key)}), true, "unreadable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			need, reason, err := NeedsBootstrap(tt.path, now)
			if err != nil {
				t.Fatalf("error: %v", err)
			}
			if need != tt.need || !strings.Contains(reason, tt.reason) {
				t.Errorf("NeedsBootstrap = %v, %q; want %v, %q", need, reason, tt.need, tt.reason)
			}
		})
	}
	// A certificate valid now needs a bootstrap once it has expired.
	if need, _, _ := NeedsBootstrap(tests[1].path, now.Add(2*time.Hour)); !need {
		t.Error("a certificate past NotAfter must need a bootstrap")
	}
}

// fakeSigner makes a fake clientset approve (or deny) and sign every CSR
// as it is created, recording what was asked.
func fakeSigner(t *testing.T, ca *testCA, deny bool) (*fake.Clientset, func() []*certificatesv1.CertificateSigningRequest) {
	client := fake.NewClientset()
	var mu sync.Mutex
	var seen []*certificatesv1.CertificateSigningRequest
	client.PrependReactor("create", "certificatesigningrequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
		csr := a.(k8stesting.CreateAction).GetObject().(*certificatesv1.CertificateSigningRequest)
		mu.Lock()
		seen = append(seen, csr.DeepCopy())
		mu.Unlock()
		if deny {
			csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
				Type: certificatesv1.CertificateDenied, Reason: "NotToday", Status: "True"})
			return false, nil, nil
		}
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateApproved, Reason: "AutoApproved", Status: "True"})
		csr.Status.Certificate = ca.signCSR(t, csr.Spec.Request)
		return false, nil, nil // the tracker stores the mutated object
	})
	return client, func() []*certificatesv1.CertificateSigningRequest {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}

func TestBootstrapWritesCertificateAndKubeconfig(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	bootstrap := filepath.Join(dir, "bootstrap.kubeconfig")
	writeTestKubeconfig(t, bootstrap, "https://10.0.0.1:6443", ca.pem, &clientcmdapi.AuthInfo{Token: "abcdef.0123456789abcdef"})
	client, seen := fakeSigner(t, ca, false)
	cfg := BootstrapConfig{
		Kubeconfig: filepath.Join(dir, "etc", "kubelet.kubeconfig"), BootstrapKubeconfig: bootstrap,
		CertDir: filepath.Join(dir, "pki"), NodeName: "n1", Client: client,
	}
	if err := Bootstrap(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}

	if len(seen()) != 1 {
		t.Fatalf("%d CSRs created, want 1", len(seen()))
	}
	csr := seen()[0]
	if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName {
		t.Errorf("signer %q", csr.Spec.SignerName)
	}
	if !slices.Contains(csr.Spec.Usages, certificatesv1.UsageClientAuth) || !slices.Contains(csr.Spec.Usages, certificatesv1.UsageDigitalSignature) {
		t.Errorf("usages %v", csr.Spec.Usages)
	}
	if !strings.HasPrefix(csr.Name, "node-csr-") {
		t.Errorf("CSR name %q", csr.Name)
	}

	// kubelet-client-current.pem -> kubelet-client-<timestamp>.pem, as upstream.
	current := filepath.Join(cfg.CertDir, "kubelet-client-current.pem")
	target, err := os.Readlink(current)
	if err != nil {
		t.Fatalf("current pair is not a symlink: %v", err)
	}
	if !strings.HasPrefix(filepath.Base(target), "kubelet-client-2") || !strings.HasSuffix(target, ".pem") {
		t.Errorf("symlink target %q", target)
	}
	data, err := os.ReadFile(current)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "system:node:n1" || !slices.Equal(cert.Subject.Organization, []string{"system:nodes"}) {
		t.Errorf("subject %s", cert.Subject)
	}
	if _, err := os.Stat(filepath.Join(cfg.CertDir, pendingKeyFile)); !os.IsNotExist(err) {
		t.Errorf("pending key file still there: %v", err)
	}

	// The kubeconfig points at the pair, with the bootstrap server and CA.
	rc, err := loadKubeconfig(cfg.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Host != "https://10.0.0.1:6443" || rc.CertFile != current || rc.KeyFile != current || string(rc.CAData) != string(ca.pem) || rc.BearerToken != "" {
		t.Errorf("kubeconfig: host %q cert %q key %q token %q", rc.Host, rc.CertFile, rc.KeyFile, rc.BearerToken)
	}
	if need, reason, err := NeedsBootstrap(cfg.Kubeconfig, time.Now()); need || err != nil {
		t.Errorf("after bootstrap: need %v (%s) err %v", need, reason, err)
	}
}

func TestBootstrapDeniedFails(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	bootstrap := filepath.Join(dir, "bootstrap.kubeconfig")
	writeTestKubeconfig(t, bootstrap, "https://10.0.0.1:6443", ca.pem, &clientcmdapi.AuthInfo{Token: "abcdef.0123456789abcdef"})
	client, _ := fakeSigner(t, ca, true)
	cfg := BootstrapConfig{
		Kubeconfig: filepath.Join(dir, "kubelet.kubeconfig"), BootstrapKubeconfig: bootstrap,
		CertDir: filepath.Join(dir, "pki"), NodeName: "n1", Client: client,
	}
	err := Bootstrap(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "denied") {
		t.Fatalf("err = %v, want a denied CSR", err)
	}
	if _, err := os.Stat(cfg.Kubeconfig); !os.IsNotExist(err) {
		t.Errorf("kubeconfig written although the CSR was denied: %v", err)
	}
	// The key is kept for the next attempt.
	if _, err := os.Stat(filepath.Join(cfg.CertDir, pendingKeyFile)); err != nil {
		t.Errorf("pending key: %v", err)
	}
}

func TestCSRNameIsStablePerRequest(t *testing.T) {
	k1, k2 := newKey(t), newKey(t)
	subj := &pkix.Name{CommonName: "system:node:a", Organization: []string{"system:nodes"}}
	usages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	a1, err := csrName(k1.Public(), subj, usages)
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := csrName(k1.Public(), subj, usages)
	b, _ := csrName(k2.Public(), subj, usages)
	c, _ := csrName(k1.Public(), &pkix.Name{CommonName: "system:node:b", Organization: subj.Organization}, usages)
	if a1 != a2 {
		t.Errorf("same request, different names: %s %s", a1, a2)
	}
	if a1 == b || a1 == c {
		t.Errorf("different requests share a name: %s %s %s", a1, b, c)
	}
}
