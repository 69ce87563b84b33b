package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
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
	"k8s.io/client-go/rest"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/kube"
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
		{"GET", "/debug/pprof/heap", "get", []string{"proxy"}},
		{"PUT", "/debug/flags/v", "update", []string{"proxy"}},
		{"GET", "/statsfoo", "get", []string{"proxy"}},
		{"PUT", "/foo", "update", []string{"proxy"}},
		{"PATCH", "/foo", "patch", []string{"proxy"}},
		{"DELETE", "/foo", "delete", []string{"proxy"}},
		{"HEAD", "/pods", "", []string{"pods", "proxy"}},
		{"HEAD", "/stats/summary", "", []string{"stats"}},
		{"OPTIONS", "/foo", "", []string{"proxy"}},
	} {
		u := &User{Name: "alice"}
		attrs := requestAttributes(u, httptest.NewRequest(tc.method, tc.path, nil), "node-1")
		var subs []string
		for _, a := range attrs {
			subs = append(subs, a.Subresource)
			if a.Verb != tc.verb || a.Name != "node-1" || a.Path != tc.path || a.User != u {
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
// (subresources), nobody else anything. It serves the two APIs over
// HTTP, so the tests see what goes on the wire.
type reviews struct {
	mu            sync.Mutex
	tokenReviews  int
	accessReviews []string // subresources asked about
	specs         []authorizationv1.SubjectAccessReviewSpec
	allowed       map[string]bool
	bothAnswers   bool // answer allowed and denied at once
}

func (rv *reviews) client(t *testing.T) kube.Interface {
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
			switch tr.Spec.Token {
			case "good-token":
				tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{
					Username: "alice", UID: "alice-uid", Groups: []string{"devs"}, Extra: map[string]authenticationv1.ExtraValue{"scopes": {"s1"}}}}
			case "expired-token":
				tr.Status = authenticationv1.TokenReviewStatus{Error: "token expired"}
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
			rv.specs = append(rv.specs, sar.Spec)
			sar.Status.Allowed = sar.Spec.User == "alice" && ra.Resource == "nodes" && ra.Name == "node-1" && rv.allowed[ra.Subresource]
			sar.Status.Denied = rv.bothAnswers
			out = &sar
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(srv.Close)
	// JSON, so the fake can decode it (Skiff sends kubeAPIContentType,
	// protobuf by default).
	c, err := kube.NewForConfig(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}})
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

// What the SubjectAccessReview carries: the user as TokenReview gave it,
// with system:authenticated added, and nodes/<name>/<subresource> of the
// core group's v1.
func TestAuthAccessReviewSpec(t *testing.T) {
	rv := &reviews{allowed: map[string]bool{"stats": true}}
	h := webhookAuth(t, rv, false, "").Filter(okHandler)
	if rec := doRequest(h, "GET", "/stats/summary", "good-token"); rec.Code != 200 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	rv.mu.Lock()
	defer rv.mu.Unlock()
	if len(rv.specs) != 1 {
		t.Fatalf("%d access reviews", len(rv.specs))
	}
	got := rv.specs[0]
	want := authorizationv1.SubjectAccessReviewSpec{
		User: "alice", UID: "alice-uid", Groups: []string{"devs", "system:authenticated"},
		Extra: map[string]authorizationv1.ExtraValue{"scopes": {"s1"}},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: "get", Version: "v1", Resource: "nodes", Subresource: "stats", Name: "node-1",
		},
	}
	if !equality(got, want) {
		t.Errorf("spec %+v %+v, want %+v %+v", got, got.ResourceAttributes, want, want.ResourceAttributes)
	}
}

// HEAD asks about no verb, as upstream: a rule for "get" does not allow
// it, only one for every verb.
func TestAuthHeadHasNoVerb(t *testing.T) {
	rv := &reviews{allowed: map[string]bool{"stats": true}}
	h := webhookAuth(t, rv, false, "").Filter(okHandler)
	if rec := doRequest(h, "HEAD", "/stats/summary", "good-token"); rec.Code != 200 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	rv.mu.Lock()
	defer rv.mu.Unlock()
	if len(rv.specs) != 1 || rv.specs[0].ResourceAttributes.Verb != "" || rv.specs[0].ResourceAttributes.Subresource != "stats" {
		t.Fatalf("access reviews %+v, want one for verb \"\" on stats", rv.specs)
	}
}

func equality(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// Bad credentials are refused even with anonymous access on; only a
// request without any is anonymous. A token is reviewed once within the
// cache TTL whether it is good or not, and an error in the review is not
// cached.
func TestAuthBadCredentialsAreNotAnonymous(t *testing.T) {
	rv := &reviews{allowed: map[string]bool{}}
	dir := t.TempDir()
	_, stranger := testCA(t, dir, "mallory")
	h := webhookAuth(t, rv, true, filepath.Join(dir, "ca.crt")).Filter(okHandler)
	for i := 0; i < 2; i++ {
		for _, token := range []string{"bad-token", "expired-token"} {
			if rec := doRequest(h, "GET", "/pods", token); rec.Code != 401 {
				t.Errorf("%s with anonymous on: %d %s, want 401", token, rec.Code, rec.Body)
			}
		}
	}
	r := httptest.NewRequest("GET", "/pods", nil)
	r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{stranger}}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	if rec.Code != 401 {
		t.Errorf("certificate of another CA with anonymous on: %d %s, want 401", rec.Code, rec.Body)
	}
	rv.mu.Lock()
	defer rv.mu.Unlock()
	if rv.tokenReviews != 3 {
		t.Errorf("%d token reviews, want 3 (bad-token once, expired-token twice)", rv.tokenReviews)
	}
}

// A bearer token in a WebSocket subprotocol authenticates too, and the
// handler sees neither it nor the Authorization header.
func TestAuthTokenIsRemoved(t *testing.T) {
	rv := &reviews{allowed: map[string]bool{"proxy": true}}
	var seen http.Header
	h := webhookAuth(t, rv, false, "").Filter(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Clone()
	}))
	rec := doRequest(h, "POST", "/exec/ns/p/c", "good-token")
	if rec.Code != 200 || seen.Get("Authorization") != "" {
		t.Errorf("bearer: %d, handler saw Authorization %q", rec.Code, seen.Get("Authorization"))
	}

	ws := func(protocols string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/exec/ns/p/c", nil)
		r.Header.Set("Connection", "Upgrade")
		r.Header.Set("Upgrade", "websocket")
		r.Header.Set("Sec-WebSocket-Protocol", protocols)
		rec := httptest.NewRecorder()
		seen = nil
		h.ServeHTTP(rec, r)
		return rec
	}
	token := "base64url.bearer.authorization.k8s.io." + base64.RawURLEncoding.EncodeToString([]byte("good-token"))
	if rec := ws(token + ", v5.channel.k8s.io"); rec.Code != 200 || seen.Get("Sec-WebSocket-Protocol") != "v5.channel.k8s.io" {
		t.Errorf("websocket token: %d, handler saw protocols %q", rec.Code, seen.Get("Sec-WebSocket-Protocol"))
	}
	if rec := ws(token); rec.Code != 401 {
		t.Errorf("websocket token without another subprotocol: %d, want 401", rec.Code)
	}
	if rec := ws("base64url.bearer.authorization.k8s.io.!!!, v5.channel.k8s.io"); rec.Code != 401 {
		t.Errorf("badly encoded websocket token: %d, want 401", rec.Code)
	}
}

// An answer both allowing and denying is an authorization error (500).
func TestAuthContradictoryReview(t *testing.T) {
	rv := &reviews{allowed: map[string]bool{"stats": true}, bothAnswers: true}
	h := webhookAuth(t, rv, false, "").Filter(okHandler)
	rec := doRequest(h, "GET", "/stats/summary", "good-token")
	want := "Authorization error (user=alice, verb=get, resource=nodes, subresource=stats)\n"
	if rec.Code != 500 || rec.Body.String() != want {
		t.Errorf("got %d %q, want 500 %q", rec.Code, rec.Body, want)
	}
}

// The client CA file is reloaded when it changes: certificates of the
// new CA authenticate, those of the old one no longer do; a file that
// holds no certificate leaves the CA loaded before in use.
func TestAuthClientCAReload(t *testing.T) {
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	oldCert, _ := testCA(t, dir, "old-client")
	rv := &reviews{allowed: map[string]bool{}}
	a := webhookAuth(t, rv, false, caFile)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	h := a.Filter(okHandler)
	code := func(c *x509.Certificate) int {
		r := httptest.NewRequest("GET", "/configz", nil)
		r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{c}}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec.Code
	}
	if c := code(oldCert); c != 403 {
		t.Fatalf("old CA's certificate before the change: %d, want 403 (authenticated)", c)
	}
	// testCA writes a new CA over ca.crt (as a new file, renamed in).
	tmp := t.TempDir()
	newCert, _ := testCA(t, tmp, "new-client")
	if err := os.Rename(filepath.Join(tmp, "ca.crt"), caFile); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the new CA", func() bool { return code(newCert) == 403 })
	if c := code(oldCert); c != 401 {
		t.Errorf("old CA's certificate after the change: %d, want 401", c)
	}
	if err := os.WriteFile(caFile, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if c := code(newCert); c != 403 {
		t.Errorf("after a bad CA file: %d, want 403 (the CA loaded before)", c)
	}
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A client certificate's user: common name, organizations as groups, its
// UID attribute, and its fingerprint as credential ID.
func TestCertificateUser(t *testing.T) {
	c := &x509.Certificate{Raw: []byte("der"), Subject: pkix.Name{CommonName: "bob", Organization: []string{"ops"},
		Names: []pkix.AttributeTypeAndValue{{Type: uidOID, Value: "bob-uid"}}}}
	u, ok, err := certificateUser(c)
	if err != nil || !ok || u.Name != "bob" || u.UID != "bob-uid" || !slices.Equal(u.Groups, []string{"ops"}) ||
		!strings.HasPrefix(u.Extra["authentication.kubernetes.io/credential-id"][0], "X509SHA256=") {
		t.Errorf("user %+v %v %v", u, ok, err)
	}
	c.Subject.Names = append(c.Subject.Names, pkix.AttributeTypeAndValue{Type: uidOID, Value: "other"})
	if _, _, err := certificateUser(c); err == nil {
		t.Error("two UIDs accepted")
	}
	if _, ok, err := certificateUser(&x509.Certificate{}); ok || err != nil {
		t.Errorf("no common name: %v %v", ok, err)
	}
}
