package certs

import (
	"context"
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestLoadClientBootstrapDecision: the bootstrap runs exactly when the
// kubeconfig has no valid client certificate, and only with a bootstrap
// kubeconfig; afterwards the kubeconfig names the stored pair.
func TestLoadClientBootstrapDecision(t *testing.T) {
	ca := newTestCA(t)
	key := newKey(t)
	node := pkix.Name{CommonName: "system:node:n1", Organization: []string{"system:nodes"}}
	now := time.Now()
	tests := []struct {
		name      string
		existing  []byte // certificate in the kubeconfig; nil: no kubeconfig
		bootstrap bool
		wantCSRs  int
		wantErr   string
	}{
		{name: "missing kubeconfig: bootstrap", bootstrap: true, wantCSRs: 1},
		{name: "valid certificate: no bootstrap", existing: ca.issue(t, node, key.Public(), now.Add(-time.Hour), now.Add(time.Hour)), bootstrap: true},
		{name: "expired certificate: bootstrap", existing: ca.issue(t, node, key.Public(), now.Add(-2*time.Hour), now.Add(-time.Hour)), bootstrap: true, wantCSRs: 1},
		{name: "missing kubeconfig, no bootstrap kubeconfig: error", wantErr: "load kubeconfig"},
		{name: "expired certificate, no bootstrap kubeconfig: used as is", existing: ca.issue(t, node, key.Public(), now.Add(-2*time.Hour), now.Add(-time.Hour))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			client, seen := fakeSigner(t, ca, false)
			cfg := ClientConfig{
				Kubeconfig: filepath.Join(dir, "kubelet.kubeconfig"), CertDir: filepath.Join(dir, "pki"),
				NodeName: "n1", bootstrapClient: client,
			}
			if tt.existing != nil {
				writeTestKubeconfig(t, cfg.Kubeconfig, "https://10.0.0.1:6443", ca.pem,
					&clientcmdapi.AuthInfo{ClientCertificateData: tt.existing, ClientKeyData: keyPEM(t, key)})
			}
			if tt.bootstrap {
				cfg.BootstrapKubeconfig = filepath.Join(dir, "bootstrap.kubeconfig")
				writeTestKubeconfig(t, cfg.BootstrapKubeconfig, "https://10.0.0.1:6443", ca.pem, &clientcmdapi.AuthInfo{Token: "abcdef.0123456789abcdef"})
			}
			c, err := LoadClient(context.Background(), cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n := len(seen()); n != tt.wantCSRs {
				t.Errorf("%d CSRs, want %d", n, tt.wantCSRs)
			}
			pair := filepath.Join(cfg.CertDir, "kubelet-client-current.pem")
			if tt.wantCSRs > 0 {
				if c.Config.CertFile != pair || c.Config.BearerToken != "" {
					t.Errorf("client uses cert %q token %q, want the bootstrapped pair", c.Config.CertFile, c.Config.BearerToken)
				}
			} else if _, err := os.Stat(pair); !os.IsNotExist(err) {
				t.Errorf("a pair was stored without a bootstrap: %v", err)
			}
			if c.Current() != nil {
				t.Error("a certificate manager without rotation")
			}
		})
	}
}

// With rotation, the client's transport presents the manager's current
// certificate (the stored pair), and the config carries no TLS files of
// its own (client-go refuses them beside a custom transport).
func TestLoadClientWithRotation(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	client, _ := fakeSigner(t, ca, false)
	cfg := ClientConfig{
		Kubeconfig: filepath.Join(dir, "kubelet.kubeconfig"), BootstrapKubeconfig: filepath.Join(dir, "bootstrap.kubeconfig"),
		CertDir: filepath.Join(dir, "pki"), NodeName: "n1", Rotate: true, bootstrapClient: client,
	}
	writeTestKubeconfig(t, cfg.BootstrapKubeconfig, "https://10.0.0.1:6443", ca.pem, &clientcmdapi.AuthInfo{Token: "abcdef.0123456789abcdef"})
	c, err := LoadClient(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	cur := c.Current()
	if cur == nil || cur.Leaf == nil || cur.Leaf.Subject.CommonName != "system:node:n1" {
		t.Fatalf("current certificate %+v", cur)
	}
	rc := c.Config
	if rc.Transport == nil || rc.CertFile != "" || rc.KeyFile != "" || len(rc.CertData) != 0 || len(rc.CAData) != 0 || rc.CAFile != "" {
		t.Errorf("rotating config: transport %v cert %q/%q data %d ca %d/%q", rc.Transport != nil, rc.CertFile, rc.KeyFile, len(rc.CertData), len(rc.CAData), rc.CAFile)
	}
	if rc.Host != "https://10.0.0.1:6443" {
		t.Errorf("host %q", rc.Host)
	}
}
