package payload

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// testCert returns a self-signed certificate as PEM.
func testCert(t *testing.T, cn string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

type fakeBundle struct {
	signer string
	labels map[string]string
	pem    string
}

type fakeTrustBundles map[string]fakeBundle

func (f fakeTrustBundles) TrustBundle(name string) (string, error) {
	b, ok := f[name]
	if !ok {
		return "", apierrors.NewNotFound(schema.GroupResource{Group: "certificates.k8s.io", Resource: "clustertrustbundles"}, name)
	}
	return b.pem, nil
}

func (f fakeTrustBundles) SignerTrustBundles(signer string, sel labels.Selector) ([]string, error) {
	var out []string
	for _, b := range f {
		if b.signer == signer && sel.Matches(labels.Set(b.labels)) {
			out = append(out, b.pem)
		}
	}
	return out, nil
}

// certsIn returns the common names of the certificates in a PEM file, in order.
func certsIn(t *testing.T, data []byte) []string {
	t.Helper()
	var names []string
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			break
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, c.Subject.CommonName)
	}
	return names
}

func TestProjectedClusterTrustBundle(t *testing.T) {
	a, b, c := testCert(t, "a"), testCert(t, "b"), testCert(t, "c")
	bundles := fakeTrustBundles{
		"plain":                  {pem: a + "junk between blocks\n" + b + a},
		"example.com:foo:one":    {signer: "example.com/foo", labels: map[string]string{"env": "prod"}, pem: a + c},
		"example.com:foo:two":    {signer: "example.com/foo", labels: map[string]string{"env": "dev"}, pem: b},
		"example.com:foo:stale":  {signer: "example.com/foo", labels: map[string]string{"env": "prod"}, pem: c},
		"example.com:other:oops": {signer: "example.com/other", labels: map[string]string{"env": "prod"}, pem: b},
	}
	name := func(n string) *string { return &n }
	prod := &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
	cases := []struct {
		name      string
		src       v1.ClusterTrustBundleProjection
		wantCerts []string // common names; nil with wantErr
		wantErr   string
	}{
		{"by name, deduplicated", v1.ClusterTrustBundleProjection{Name: name("plain")}, []string{"a", "b"}, ""},
		{"missing name", v1.ClusterTrustBundleProjection{Name: name("gone")}, nil, `"gone" not found`},
		{"missing name, optional", v1.ClusterTrustBundleProjection{Name: name("gone"), Optional: yes()}, []string{}, ""},
		{"signer and selector", v1.ClusterTrustBundleProjection{SignerName: name("example.com/foo"), LabelSelector: prod}, []string{"a", "c"}, ""},
		{"signer, empty selector matches all of the signer's", v1.ClusterTrustBundleProjection{SignerName: name("example.com/foo"), LabelSelector: &metav1.LabelSelector{}}, []string{"a", "b", "c"}, ""},
		{"signer, nil selector matches nothing", v1.ClusterTrustBundleProjection{SignerName: name("example.com/foo")}, nil, "matched no ClusterTrustBundle"},
		{"signer without match, optional", v1.ClusterTrustBundleProjection{SignerName: name("example.com/none"), LabelSelector: prod, Optional: yes()}, []string{}, ""},
		{"bad selector", v1.ClusterTrustBundleProjection{SignerName: name("example.com/foo"), LabelSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Sometimes"}}}}, nil, "label selector"},
		{"neither name nor signer", v1.ClusterTrustBundleProjection{}, nil, "neither a bundle nor a signer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.src.Path = "ca.pem"
			src := &v1.ProjectedVolumeSource{DefaultMode: i32(0o440), Sources: []v1.VolumeProjection{{ClusterTrustBundle: &tc.src}}}
			got, err := Projected(src, testPod(), Getters{TrustBundles: bundles}, nil)
			if !checkErr(t, err, tc.wantErr) {
				return
			}
			f, ok := got["ca.pem"]
			if !ok || f.Mode != 0o440 || len(got) != 1 {
				t.Fatalf("files = %v", got)
			}
			names := certsIn(t, f.Data)
			// Sorted by DER, not by name: compare as sets, and check the
			// order is the same whatever order the bundles came in.
			if len(names) != len(tc.wantCerts) || !sameSet(names, tc.wantCerts) {
				t.Errorf("certificates %v, want %v", names, tc.wantCerts)
			}
			if strings.Contains(string(f.Data), "junk") {
				t.Errorf("text between PEM blocks kept: %s", f.Data)
			}
		})
	}
}

func sameSet(a, b []string) bool {
	m := map[string]int{}
	for _, s := range a {
		m[s]++
	}
	for _, s := range b {
		m[s]--
	}
	for _, n := range m {
		if n != 0 {
			return false
		}
	}
	return true
}

func TestNormalizeTrustAnchorsIsOrderIndependent(t *testing.T) {
	a, b := testCert(t, "a"), testCert(t, "b")
	if x, y := normalizeTrustAnchors([]string{a, b}), normalizeTrustAnchors([]string{b + a, a}); string(x) != string(y) {
		t.Errorf("order changes the file:\n%s\nvs\n%s", x, y)
	}
}

func TestProjectedClusterTrustBundleNoGetter(t *testing.T) {
	n := "x"
	src := &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Name: &n, Path: "ca.pem"}}}}
	_, err := Projected(src, testPod(), Getters{}, nil)
	checkErr(t, err, "no trust bundle getter")
}
