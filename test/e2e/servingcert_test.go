//go:build e2e

package e2e

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"slices"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// With serverTLSBootstrap, Skiff asks for its serving certificate
// with a kubernetes.io/kubelet-serving CSR for system:node:<name> whose
// SANs are the Node's addresses. The controller-manager does not approve
// those; once an administrator does, the CA signs it and Skiff stores and
// uses it.
func TestServerTLSBootstrap(t *testing.T) {
	cn := newPrivateClusterNode(t)
	appendNodeConfig(t, cn.node, "serverTLSBootstrap: true\n")
	started := time.Now().Add(-time.Second).Truncate(time.Second)
	cn.start()
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)

	user := "system:node:" + cn.hostname()
	var csr certificatesv1.CertificateSigningRequest
	waitFor(t, 30*time.Second, "a kubelet-serving CSR from the node", func() (bool, error) {
		for _, r := range csrsBy(t, cn.c, certificatesv1.KubeletServingSignerName, user) {
			if !r.CreationTimestamp.Time.Before(started) {
				csr = r
				return true, nil
			}
		}
		return false, nil
	})
	block, _ := pem.Decode(csr.Spec.Request)
	req, err := x509.ParseCertificateRequest(block.Bytes)
	must(t, err)
	if req.Subject.CommonName != user || !slices.Equal(req.Subject.Organization, []string{"system:nodes"}) {
		t.Errorf("CSR subject %s", req.Subject)
	}
	if !slices.Contains(csr.Spec.Usages, certificatesv1.UsageServerAuth) {
		t.Errorf("CSR usages %v", csr.Spec.Usages)
	}
	var internalIP string
	for _, a := range cn.getNode(t).Status.Addresses {
		if a.Type == v1.NodeInternalIP {
			internalIP = a.Address
		}
	}
	if !slices.ContainsFunc(req.IPAddresses, func(ip net.IP) bool { return ip.String() == internalIP }) || !slices.Contains(req.DNSNames, cn.hostname()) {
		t.Errorf("CSR SANs ips %v dns %v, want the InternalIP %s and hostname %s", req.IPAddresses, req.DNSNames, internalIP, cn.hostname())
	}

	// Not approved by the controller-manager: still pending a while later.
	time.Sleep(5 * time.Second)
	r, err := cn.admin.CertificatesV1().CertificateSigningRequests().Get(cn.ctx(), csr.Name, metav1.GetOptions{})
	must(t, err)
	if len(r.Status.Conditions) != 0 || len(r.Status.Certificate) != 0 {
		t.Fatalf("serving CSR was decided without an administrator: %+v", r.Status.Conditions)
	}
	servingPair := cn.root + "/pki/kubelet-server-current.pem"
	if _, err := os.Stat(servingPair); !os.IsNotExist(err) {
		t.Errorf("a serving pair exists before approval: %v", err)
	}

	// An administrator approves it (kubectl certificate approve).
	r.Status.Conditions = append(r.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: v1.ConditionTrue,
		Reason: "E2EApprove", Message: "approved by the e2e test",
	})
	_, err = cn.admin.CertificatesV1().CertificateSigningRequests().UpdateApproval(cn.ctx(), r.Name, r, metav1.UpdateOptions{})
	must(t, err)
	waitFor(t, 30*time.Second, "the serving certificate stored", func() (bool, error) {
		_, err := os.Stat(servingPair)
		return err == nil, nil
	})
	cert := readCert(t, servingPair)
	if cert.Subject.CommonName != user || !slices.ContainsFunc(cert.IPAddresses, func(ip net.IP) bool { return ip.String() == internalIP }) {
		t.Errorf("serving certificate %s ips %v", cert.Subject, cert.IPAddresses)
	}
	verifyIssuedByCluster(t, cn.c, cert, x509.ExtKeyUsageServerAuth)
}
