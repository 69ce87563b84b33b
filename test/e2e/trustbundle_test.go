//go:build e2e

package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certsv1beta1 "k8s.io/api/certificates/v1beta1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// clusterTrustBundle projections, by name and by signer with a
// label selector, as the pod sees them; a missing bundle fails the mount
// visibly unless the source is optional.
func TestClusterTrustBundleProjection(t *testing.T) {
	cn := sharedNode(t)
	ctx := cn.ctx()
	// The certificates are only compared as text: any PEM will do.
	certA, certB, certC := testCAPEM(t, "bundle-a"), testCAPEM(t, "bundle-b"), testCAPEM(t, "bundle-c")
	signer := "skiff.test/" + cn.ns
	prefix := strings.ReplaceAll(signer, "/", ":") + ":"
	bundles := []certsv1beta1.ClusterTrustBundle{
		{ObjectMeta: metav1.ObjectMeta{Name: cn.ns + "-plain"}, Spec: certsv1beta1.ClusterTrustBundleSpec{TrustBundle: certA}},
		{ObjectMeta: metav1.ObjectMeta{Name: prefix + "one", Labels: map[string]string{"pick": "yes"}},
			Spec: certsv1beta1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: certB}},
		// Shares certB with "one": the projection holds it once.
		{ObjectMeta: metav1.ObjectMeta{Name: prefix + "three", Labels: map[string]string{"pick": "yes"}},
			Spec: certsv1beta1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: certB + certA}},
		{ObjectMeta: metav1.ObjectMeta{Name: prefix + "two", Labels: map[string]string{"pick": "no"}},
			Spec: certsv1beta1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: certC}},
	}
	for i := range bundles {
		_, err := cn.admin.CertificatesV1beta1().ClusterTrustBundles().Create(ctx, &bundles[i], metav1.CreateOptions{})
		must(t, err)
		t.Cleanup(func() {
			_ = cn.admin.CertificatesV1beta1().ClusterTrustBundles().Delete(ctx, bundles[i].Name, metav1.DeleteOptions{})
		})
	}
	plain, missing := cn.ns+"-plain", cn.ns+"-missing"
	yes := true
	p := busyboxPod("ctb", `grep -c BEGIN /ctb/by-name.pem /ctb/by-signer.pem /ctb/optional.pem; sleep 3600`)
	p.Spec.Volumes = []v1.Volume{{Name: "ctb", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		Sources: []v1.VolumeProjection{
			{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Name: &plain, Path: "by-name.pem"}},
			{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{SignerName: &signer, Path: "by-signer.pem",
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pick": "yes"}}}},
			{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Name: &missing, Optional: &yes, Path: "optional.pem"}},
		},
	}}}}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "ctb", MountPath: "/ctb"}}

	bad := busyboxPod("ctb-missing", "sleep 3600")
	bad.Spec.Volumes = []v1.Volume{{Name: "ctb", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		Sources: []v1.VolumeProjection{{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Name: &missing, Path: "ca.pem"}}},
	}}}}
	bad.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "ctb", MountPath: "/ctb"}}

	created := cn.createPod(t, p)
	cn.createPod(t, bad)
	cn.waitPod(t, cn.ns, "ctb", 60*time.Second, "running", isReady)

	// The container counts the certificates it can read in each file.
	logFile := filepath.Join(podLogsRoot, cn.ns+"_ctb_"+string(created.UID), "main", "0.log")
	waitFor(t, 20*time.Second, "the container's certificate counts", func() (bool, error) {
		b, _ := os.ReadFile(logFile)
		return strings.Contains(string(b), "/ctb/optional.pem:0"), nil
	})
	b, _ := os.ReadFile(logFile)
	for _, want := range []string{"/ctb/by-name.pem:1", "/ctb/by-signer.pem:2", "/ctb/optional.pem:0"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("container log lacks %q:\n%s", want, b)
		}
	}
	// And they are the right certificates: the named bundle's, and the
	// selected bundles' (each certificate once), not the other one's.
	dir := filepath.Join(cn.root, "pods", string(created.UID), "volumes", "kubernetes.io~projected", "ctb")
	byName, err := os.ReadFile(filepath.Join(dir, "by-name.pem"))
	must(t, err)
	bySigner, err := os.ReadFile(filepath.Join(dir, "by-signer.pem"))
	must(t, err)
	if string(byName) != certA || !strings.Contains(string(bySigner), certA) || !strings.Contains(string(bySigner), certB) ||
		strings.Contains(string(bySigner), certC) {
		t.Errorf("by-name.pem:\n%s\nby-signer.pem:\n%s", byName, bySigner)
	}

	// The pod whose required bundle is missing stays Pending with a
	// FailedMount event naming it.
	waitFor(t, 30*time.Second, "FailedMount event for the missing bundle", func() (bool, error) {
		evs, err := cn.admin.CoreV1().Events(cn.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=ctb-missing"})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == "FailedMount" && strings.Contains(e.Message, missing) {
				return true, nil
			}
		}
		return false, nil
	})
	if got := cn.getPod(t, "ctb-missing"); got.Status.Phase != v1.PodPending {
		t.Errorf("pod with a missing bundle is %s, want Pending", got.Status.Phase)
	}
}

// testCAPEM returns a fresh self-signed CA certificate as PEM.
func testCAPEM(t *testing.T, cn string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, IsCA: true,
		BasicConstraintsValid: true, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
