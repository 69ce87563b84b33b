package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

func TestRequestAttributes(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		verb         string
		subresources []string
	}{
		{"GET", "/stats/summary", "get", []string{"stats"}},
		{"GET", "/stats", "get", []string{"stats"}},
		{"GET", "/metrics", "get", []string{"metrics"}},
		{"GET", "/metrics/resource", "get", []string{"metrics"}},
		{"GET", "/metrics/cadvisor", "get", []string{"metrics"}},
		{"GET", "/logs/syslog", "get", []string{"log"}},
		{"POST", "/checkpoint/ns/p/c", "create", []string{"checkpoint"}},
		{"GET", "/pods", "get", []string{"pods", "proxy"}},
		{"GET", "/runningpods/", "get", []string{"pods", "proxy"}},
		{"GET", "/healthz", "get", []string{"healthz", "proxy"}},
		{"GET", "/healthz/syncloop", "get", []string{"healthz", "proxy"}},
		{"GET", "/configz", "get", []string{"configz", "proxy"}},
		{"POST", "/exec/ns/p/c", "create", []string{"proxy"}},
		{"GET", "/exec/ns/p/c", "get", []string{"proxy"}},
		{"POST", "/run/ns/p/c", "create", []string{"proxy"}},
		{"GET", "/attach/ns/p/c", "get", []string{"proxy"}},
		{"POST", "/portForward/ns/p", "create", []string{"proxy"}},
		{"GET", "/containerLogs/ns/p/c", "get", []string{"proxy"}},
		{"GET", "/spec", "get", []string{"proxy"}}, // gone upstream: proxy
		{"GET", "/statsfoo", "get", []string{"proxy"}},
		{"PUT", "/foo", "update", []string{"proxy"}},
		{"PATCH", "/foo", "patch", []string{"proxy"}},
		{"DELETE", "/foo", "delete", []string{"proxy"}},
	} {
		u := &user.DefaultInfo{Name: "alice"}
		attrs := requestAttributes(u, httptest.NewRequest(tc.method, tc.path, nil), "node-1")
		var subs []string
		for _, a := range attrs {
			subs = append(subs, a.GetSubresource())
			if a.GetVerb() != tc.verb || a.GetResource() != "nodes" || a.GetName() != "node-1" || a.GetAPIVersion() != "v1" ||
				!a.IsResourceRequest() || a.GetNamespace() != "" || a.GetPath() != tc.path || a.GetUser().GetName() != "alice" {
				t.Errorf("%s %s: attributes %+v", tc.method, tc.path, a)
			}
		}
		if !slices.Equal(subs, tc.subresources) {
			t.Errorf("%s %s: subresources %v, want %v", tc.method, tc.path, subs, tc.subresources)
		}
	}
}

// reviews is a fake apiserver's TokenReview and SubjectAccessReview: the
// token "good-token" is alice; alice may do what allowed lists
// (subresources), nobody else anything. The webhooks post through the
// REST client itself (not the typed Create), so client-go's fake
// clientset cannot stand in: this serves the two APIs over HTTP.
type reviews struct {
	mu            sync.Mutex
	tokenReviews  int
	accessReviews []string // subresources asked about
	allowed       map[string]bool
}

func (rv *reviews) client(t *testing.T) kubernetes.Interface {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rv.mu.Lock()
		defer rv.mu.Unlock()
		var out any
		switch r.URL.Path {
		case "/apis/authentication.k8s.io/v1/tokenreviews":
			var tr authenticationv1.TokenReview
			if err := json.NewDecoder(r.Body).Decode(&tr); err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			rv.tokenReviews++
			if tr.Spec.Token == "good-token" {
				tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "alice", Groups: []string{"devs"}}}
			}
			out = &tr
		case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
			var sar authorizationv1.SubjectAccessReview
			if err := json.NewDecoder(r.Body).Decode(&sar); err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			ra := sar.Spec.ResourceAttributes
			rv.accessReviews = append(rv.accessReviews, ra.Subresource)
			sar.Status.Allowed = sar.Spec.User == "alice" && ra.Resource == "nodes" && ra.Name == "node-1" && rv.allowed[ra.Subresource]
			out = &sar
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(srv.Close)
	c, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func webhookAuth(t *testing.T, rv *reviews, anonymous bool, caFile string) *Auth {
	t.Helper()
	c := rv.client(t)
	a, err := NewAuth(AuthConfig{
		NodeName: "node-1",
		Authentication: kubeletconfig.KubeletAuthentication{
			X509:      kubeletconfig.KubeletX509Authentication{ClientCAFile: caFile},
			Webhook:   kubeletconfig.KubeletWebhookAuthentication{Enabled: ptr.To(true), CacheTTL: metav1.Duration{Duration: time.Minute}},
			Anonymous: kubeletconfig.KubeletAnonymousAuthentication{Enabled: ptr.To(anonymous)},
		},
		Authorization: kubeletconfig.KubeletAuthorization{
			Mode: kubeletconfig.KubeletAuthorizationModeWebhook,
			Webhook: kubeletconfig.KubeletWebhookAuthorization{
				CacheAuthorizedTTL: metav1.Duration{Duration: time.Minute}, CacheUnauthorizedTTL: metav1.Duration{Duration: time.Minute},
			},
		},
		TokenReviews: c.AuthenticationV1(), SubjectAccessReviews: c.AuthorizationV1(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("served")) })

func doRequest(h http.Handler, method, path, token string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

func TestAuthWebhook(t *testing.T) {
	rv := &reviews{allowed: map[string]bool{"stats": true, "proxy": true}}
	h := webhookAuth(t, rv, false, "").Filter(okHandler)

	for _, tc := range []struct {
		name, method, path, token string
		code                      int
		body                      string
	}{
		{"no credentials", "GET", "/pods", "", 401, "Unauthorized\n"},
		{"bad token", "GET", "/pods", "bad-token", 401, "Unauthorized\n"},
		{"stats allowed", "GET", "/stats/summary", "good-token", 200, "served"},
		{"pods through proxy", "GET", "/pods", "good-token", 200, "served"},
		{"exec through proxy", "POST", "/exec/ns/p/c", "good-token", 200, "served"},
		{"metrics denied", "GET", "/metrics", "good-token", 403,
			"Forbidden (user=alice, verb=get, resource=nodes, subresource(s)=[metrics])\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := doRequest(h, tc.method, tc.path, tc.token)
			if rec.Code != tc.code || rec.Body.String() != tc.body {
				t.Errorf("got %d %q, want %d %q", rec.Code, rec.Body, tc.code, tc.body)
			}
		})
	}

	// Fine-grained first, then the proxy fallback.
	rv.mu.Lock()
	rv.accessReviews = nil
	rv.allowed = map[string]bool{}
	rv.mu.Unlock()
	h = webhookAuth(t, rv, false, "").Filter(okHandler)
	rec := doRequest(h, "GET", "/pods", "good-token")
	want := "Forbidden (user=alice, verb=get, resource=nodes, subresource(s)=[pods proxy])\n"
	if rec.Code != 403 || rec.Body.String() != want {
		t.Errorf("got %d %q, want 403 %q", rec.Code, rec.Body, want)
	}
	if !slices.Equal(rv.accessReviews, []string{"pods", "proxy"}) {
		t.Errorf("access reviews %v, want [pods proxy]", rv.accessReviews)
	}
}

func TestAuthCaches(t *testing.T) {
	rv := &reviews{allowed: map[string]bool{"stats": true}}
	h := webhookAuth(t, rv, false, "").Filter(okHandler)
	for i := 0; i < 3; i++ {
		if rec := doRequest(h, "GET", "/stats/summary", "good-token"); rec.Code != 200 {
			t.Fatalf("request %d: %d %s", i, rec.Code, rec.Body)
		}
		if rec := doRequest(h, "GET", "/metrics", "good-token"); rec.Code != 403 {
			t.Fatalf("request %d: %d %s", i, rec.Code, rec.Body)
		}
	}
	rv.mu.Lock()
	defer rv.mu.Unlock()
	if rv.tokenReviews != 1 || len(rv.accessReviews) != 2 {
		t.Errorf("%d token reviews and access reviews %v: want 1 and 2 within the cache TTLs", rv.tokenReviews, rv.accessReviews)
	}
}

func TestAuthAnonymous(t *testing.T) {
	rv := &reviews{allowed: map[string]bool{}}
	h := webhookAuth(t, rv, true, "").Filter(okHandler)
	rec := doRequest(h, "GET", "/healthz", "")
	want := "Forbidden (user=system:anonymous, verb=get, resource=nodes, subresource(s)=[healthz proxy])\n"
	if rec.Code != 403 || rec.Body.String() != want {
		t.Errorf("got %d %q, want 403 %q", rec.Code, rec.Body, want)
	}

	a, err := NewAuth(AuthConfig{
		NodeName:       "node-1",
		Authentication: kubeletconfig.KubeletAuthentication{Anonymous: kubeletconfig.KubeletAnonymousAuthentication{Enabled: ptr.To(true)}, Webhook: kubeletconfig.KubeletWebhookAuthentication{Enabled: ptr.To(false)}},
		Authorization:  kubeletconfig.KubeletAuthorization{Mode: kubeletconfig.KubeletAuthorizationModeAlwaysAllow},
	})
	if err != nil {
		t.Fatal(err)
	}
	if rec := doRequest(a.Filter(okHandler), "POST", "/exec/ns/p/c", ""); rec.Code != 200 {
		t.Errorf("anonymous with AlwaysAllow: %d %s", rec.Code, rec.Body)
	}
}

func TestAuthNoMethodRefusesAll(t *testing.T) {
	a, err := NewAuth(AuthConfig{
		NodeName:       "node-1",
		Authentication: kubeletconfig.KubeletAuthentication{Anonymous: kubeletconfig.KubeletAnonymousAuthentication{Enabled: ptr.To(false)}, Webhook: kubeletconfig.KubeletWebhookAuthentication{Enabled: ptr.To(false)}},
		Authorization:  kubeletconfig.KubeletAuthorization{Mode: kubeletconfig.KubeletAuthorizationModeAlwaysAllow},
	})
	if err != nil {
		t.Fatal(err)
	}
	if rec := doRequest(a.Filter(okHandler), "GET", "/pods", "any-token"); rec.Code != 401 {
		t.Errorf("got %d %s, want 401", rec.Code, rec.Body)
	}
}

func TestAuthWebhooksNeedAnAPIServer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		webhook bool
		mode    kubeletconfig.KubeletAuthorizationMode
		want    string
	}{
		{"authentication", true, kubeletconfig.KubeletAuthorizationModeAlwaysAllow, "authentication.webhook.enabled needs an apiserver"},
		{"authorization", false, kubeletconfig.KubeletAuthorizationModeWebhook, "authorization.mode Webhook needs an apiserver"},
		{"unknown mode", false, "Sometimes", `unknown authorization mode "Sometimes"`},
	} {
		_, err := NewAuth(AuthConfig{
			NodeName: "node-1",
			Authentication: kubeletconfig.KubeletAuthentication{
				Anonymous: kubeletconfig.KubeletAnonymousAuthentication{Enabled: ptr.To(true)},
				Webhook:   kubeletconfig.KubeletWebhookAuthentication{Enabled: ptr.To(tc.webhook)},
			},
			Authorization: kubeletconfig.KubeletAuthorization{Mode: tc.mode},
		})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
}

// testCA makes a CA in dir (ca.crt) and returns a client certificate
// for cn signed by it, and one signed by nobody the server trusts.
func testCA(t *testing.T, dir, cn string) (signed, stranger *x509.Certificate) {
	t.Helper()
	newCA := func() (*x509.Certificate, *ecdsa.PrivateKey) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := x509.ParseCertificate(der)
		return c, key
	}
	leaf := func(ca *x509.Certificate, caKey *ecdsa.PrivateKey) *x509.Certificate {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn, Organization: []string{"system:masters"}},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := x509.ParseCertificate(der)
		return c
	}
	ca, caKey := newCA()
	other, otherKey := newCA()
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return leaf(ca, caKey), leaf(other, otherKey)
}

func TestAuthClientCertificate(t *testing.T) {
	dir := t.TempDir()
	signed, stranger := testCA(t, dir, "kube-apiserver-kubelet-client")
	rv := &reviews{allowed: map[string]bool{}}
	h := webhookAuth(t, rv, false, filepath.Join(dir, "ca.crt")).Filter(okHandler)
	withCert := func(c *x509.Certificate) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/configz", nil)
		r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{c}}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec
	}
	// The certificate's user is kube-apiserver-kubelet-client: the fake
	// apiserver allows only alice, so a 403 naming that user shows the
	// certificate authenticated.
	rec := withCert(signed)
	want := "Forbidden (user=kube-apiserver-kubelet-client, verb=get, resource=nodes, subresource(s)=[configz proxy])\n"
	if rec.Code != 403 || rec.Body.String() != want {
		t.Errorf("CA-signed certificate: %d %q, want 403 %q", rec.Code, rec.Body, want)
	}
	if rec := withCert(stranger); rec.Code != 401 {
		t.Errorf("certificate of another CA: %d %s, want 401", rec.Code, rec.Body)
	}
}
