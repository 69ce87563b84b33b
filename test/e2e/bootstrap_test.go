//go:build e2e

package e2e

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/skiff-sh/skiff/test/cluster"
)

// bootstrapNode is a Skiff given only a bootstrap token: --kubeconfig
// names a file that does not exist yet.
type bootstrapNode struct {
	*clusterNode
	kubeconfig string
	tokenID    string
}

// newBootstrapNode prepares n, a Skiff, to join c with a fresh bootstrap
// token; extraConfig is appended to its KubeletConfiguration.
func newBootstrapNode(t *testing.T, c *cluster.Cluster, n *node, extraConfig string) *bootstrapNode {
	t.Helper()
	ctx := context.Background()
	cn := &clusterNode{node: n, c: c, admin: c.Client()}
	cn.ns = c.NewNamespace(ctx, t)
	t.Cleanup(func() { cn.deleteAllPods() })
	token, err := c.CreateBootstrapToken(ctx)
	must(t, err)
	dir := filepath.Dir(n.config)
	bootstrap := filepath.Join(dir, "bootstrap.kubeconfig")
	must(t, c.BootstrapKubeconfig(token, bootstrap))
	n.setAuth(clusterAuth(c))
	appendNodeConfig(t, n, extraConfig)
	kubeconfig := filepath.Join(dir, "kubelet.kubeconfig")
	n.args = append(n.args, "--bootstrap-kubeconfig", bootstrap, "--kubeconfig", kubeconfig)
	return &bootstrapNode{clusterNode: cn, kubeconfig: kubeconfig, tokenID: strings.SplitN(token, ".", 2)[0]}
}

// appendNodeConfig appends extra to the node's KubeletConfiguration file.
func appendNodeConfig(t *testing.T, n *node, extra string) {
	t.Helper()
	if extra == "" {
		return
	}
	b, err := os.ReadFile(n.config)
	must(t, err)
	must(t, os.WriteFile(n.config, []byte(mergeConfig(string(b), extra)), 0o644))
}

func (bn *bootstrapNode) pkiPath(name string) string { return filepath.Join(bn.root, "pki", name) }

// clientCert is the certificate Skiff's kubeconfig names now.
func (bn *bootstrapNode) clientCert(t *testing.T) *x509.Certificate {
	t.Helper()
	return readCert(t, bn.pkiPath("kubelet-client-current.pem"))
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			t.Fatalf("%s holds no certificate", path)
		}
		if block.Type == "CERTIFICATE" {
			c, err := x509.ParseCertificate(block.Bytes)
			must(t, err)
			return c
		}
	}
}

// verifyIssuedByCluster checks cert chains to the cluster CA for usage.
func verifyIssuedByCluster(t *testing.T, c *cluster.Cluster, cert *x509.Certificate, usage x509.ExtKeyUsage) {
	t.Helper()
	caPEM, err := os.ReadFile(c.CAFile())
	must(t, err)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		t.Errorf("certificate %s not issued by the cluster CA for %v: %v", cert.Subject, usage, err)
	}
}

// csrsBy lists the CSRs of signer requested by user.
func csrsBy(t *testing.T, c *cluster.Cluster, signer, user string) []certificatesv1.CertificateSigningRequest {
	t.Helper()
	list, err := c.Client().CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	must(t, err)
	var out []certificatesv1.CertificateSigningRequest
	for _, r := range list.Items {
		if r.Spec.SignerName == signer && r.Spec.Username == user {
			out = append(out, r)
		}
	}
	return out
}

func csrCondition(r *certificatesv1.CertificateSigningRequest, typ certificatesv1.RequestConditionType) *certificatesv1.CertificateSigningRequestCondition {
	for i := range r.Status.Conditions {
		if r.Status.Conditions[i].Type == typ {
			return &r.Status.Conditions[i]
		}
	}
	return nil
}

// A node joins with only a bootstrap token. The
// controller-manager approves and signs its CSR; Skiff ends Ready with a
// system:node:<name> certificate for a key it generated, stored as
// upstream lays it out; a restart reuses it without a new CSR.
func TestTLSBootstrapJoinsNode(t *testing.T) {
	c := getCluster(t)
	bn := newBootstrapNode(t, c, newNode(t), "")
	if _, err := os.Stat(bn.kubeconfig); !os.IsNotExist(err) {
		t.Fatalf("kubeconfig exists before the bootstrap: %v", err)
	}
	bn.start()
	bn.waitNodeReady(t, v1.ConditionTrue, 90*time.Second)

	// The CSR: requested with the bootstrap token, auto-approved, signed.
	user := "system:bootstrap:" + bn.tokenID
	csrs := csrsBy(t, c, certificatesv1.KubeAPIServerClientKubeletSignerName, user)
	if len(csrs) != 1 {
		t.Fatalf("%d client CSRs by %s, want 1", len(csrs), user)
	}
	r := csrs[0]
	if a := csrCondition(&r, certificatesv1.CertificateApproved); a == nil || a.Reason != "AutoApproved" {
		t.Errorf("CSR %s not auto-approved: %+v", r.Name, r.Status.Conditions)
	}
	if !slices.Contains(r.Spec.Groups, "system:bootstrappers") {
		t.Errorf("CSR groups %v", r.Spec.Groups)
	}
	block, _ := pem.Decode(r.Spec.Request)
	req, err := x509.ParseCertificateRequest(block.Bytes)
	must(t, err)

	// kubelet-client-current.pem -> kubelet-client-<timestamp>.pem.
	target, err := os.Readlink(bn.pkiPath("kubelet-client-current.pem"))
	must(t, err)
	if b := filepath.Base(target); !strings.HasPrefix(b, "kubelet-client-2") || !strings.HasSuffix(b, ".pem") {
		t.Errorf("current pair links to %q", target)
	}
	cert := bn.clientCert(t)
	if cert.Subject.CommonName != "system:node:"+nodeName || !slices.Equal(cert.Subject.Organization, []string{"system:nodes"}) {
		t.Errorf("client certificate subject %s", cert.Subject)
	}
	verifyIssuedByCluster(t, c, cert, x509.ExtKeyUsageClientAuth)
	pub, err := x509.MarshalPKIXPublicKey(cert.PublicKey)
	must(t, err)
	reqPub, err := x509.MarshalPKIXPublicKey(req.PublicKey)
	must(t, err)
	if string(pub) != string(reqPub) {
		t.Error("the certificate is not for the key of Skiff's CSR")
	}
	if fi, err := os.Stat(filepath.Join(bn.root, "pki")); err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("pki directory mode: %v %v", fi.Mode(), err)
	}

	// The kubeconfig Skiff wrote uses that pair and reaches the apiserver.
	rc, err := clientcmd.BuildConfigFromFlags("", bn.kubeconfig)
	must(t, err)
	if rc.CertFile != bn.pkiPath("kubelet-client-current.pem") || rc.BearerToken != "" || rc.Host != c.APIServerURL() {
		t.Errorf("kubeconfig: host %q cert %q token set %v", rc.Host, rc.CertFile, rc.BearerToken != "")
	}

	// A restart finds a valid kubeconfig: no second CSR.
	bn.stop()
	bn.start()
	bn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	l := bn.lease(t).Spec.RenewTime.Time
	waitFor(t, 25*time.Second, "lease renewed after the restart", func() (bool, error) {
		return bn.lease(t).Spec.RenewTime.After(l), nil
	})
	if n := len(csrsBy(t, c, certificatesv1.KubeAPIServerClientKubeletSignerName, user)); n != 1 {
		t.Errorf("%d CSRs after a restart, want still 1", n)
	}
	if got := bn.clientCert(t); !got.Equal(cert) {
		t.Error("the restart replaced the client certificate")
	}
}
