package server

// These tests run Skiff's authentication, authorization and healthz
// against the k8s.io/apiserver code the upstream kubelet uses (and Skiff
// used before; see the package comment for why it no longer links it):
// same requests, same answers. They keep the two from drifting apart
// when either changes.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/user"
	azr "k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/apiserver/pkg/server/healthz"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

// /healthz and /healthz/<check>, passing and failing, with ?verbose and
// ?exclude, on both kinds of server.
func TestHealthzAsUpstream(t *testing.T) {
	var syncErr error
	ours, theirs := http.NewServeMux(), http.NewServeMux()
	installHealthz(ours, pingCheck, logCheck, healthCheck{"syncloop", func(*http.Request) error { return syncErr }})
	healthz.InstallHandler(theirs, healthz.PingHealthz, healthz.LogHealthz, healthz.NamedCheck("syncloop", func(*http.Request) error { return syncErr }))
	p0, p1 := http.NewServeMux(), http.NewServeMux()
	installHealthz(p0)
	healthz.InstallHandler(p1)
	get := func(m *http.ServeMux, path string) string {
		rec := httptest.NewRecorder()
		m.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		b, _ := io.ReadAll(rec.Body)
		return rec.Result().Status + "|" + rec.Header().Get("Content-Type") + "|" + rec.Header().Get("X-Content-Type-Options") + "|" + string(b)
	}
	paths := []string{"/healthz", "/healthz?verbose", "/healthz?verbose&exclude=log&exclude=nope&exclude=zz", "/healthz/ping", "/healthz/log", "/healthz/syncloop", "/healthz/nope", "/healthz?exclude=syncloop"}
	for round := 0; round < 2; round++ {
		for _, p := range paths {
			a, b := get(ours, p), get(theirs, p)
			if a != b {
				t.Errorf("round %d %s:\n ours   %q\n theirs %q", round, p, a, b)
			}
		}
		syncErr = errors.New("stalled")
	}
	for _, p := range paths {
		if a, b := get(p0, p), get(p1, p); a != b {
			t.Errorf("port %s:\n ours   %q\n theirs %q", p, a, b)
		}
	}
}

// Each kind of credential, good and bad, with and without anonymous access
// and a client CA: the same user (name, UID, groups, extra), the same
// error or none, and the same headers left for the handler.
func TestAuthenticationAsUpstream(t *testing.T) {
	dir := t.TempDir()
	signed, stranger := testCA(t, dir, "certuser")
	caFile := filepath.Join(dir, "ca.crt")
	for _, anon := range []bool{false, true} {
		for _, withCA := range []bool{false, true} {
			rv := &reviews{allowed: map[string]bool{}}
			c := rv.client(t)
			cf := ""
			if withCA {
				cf = caFile
			}
			ours, err := NewAuth(AuthConfig{NodeName: "n", Authentication: kubeletconfig.KubeletAuthentication{
				X509:      kubeletconfig.KubeletX509Authentication{ClientCAFile: cf},
				Webhook:   kubeletconfig.KubeletWebhookAuthentication{Enabled: ptr.To(true), CacheTTL: metav1.Duration{Duration: time.Minute}},
				Anonymous: kubeletconfig.KubeletAnonymousAuthentication{Enabled: ptr.To(anon)},
			}, Authorization: kubeletconfig.KubeletAuthorization{Mode: "AlwaysAllow"}, TokenReviews: c.AuthenticationV1()})
			if err != nil {
				t.Fatal(err)
			}
			b := webhookRetryBackoff
			dc := authenticatorfactory.DelegatingAuthenticatorConfig{
				Anonymous: &apiserver.AnonymousAuthConfig{Enabled: anon}, CacheTTL: time.Minute,
				TokenAccessReviewClient: c.AuthenticationV1(), WebhookRetryBackoff: &b,
			}
			if withCA {
				ca, _ := dynamiccertificates.NewDynamicCAContentFromFile("x", caFile)
				dc.ClientCertificateCAContentProvider = ca
			}
			theirs, _, err := dc.New()
			if err != nil {
				t.Fatal(err)
			}
			tok := func(s string) string {
				return "base64url.bearer.authorization.k8s.io." + base64.RawURLEncoding.EncodeToString([]byte(s))
			}
			// req makes a request with an Authorization header, a client
			// certificate and WebSocket subprotocols, each when set.
			req := func(auth string, cert *x509.Certificate, protocols string) func() *http.Request {
				return func() *http.Request {
					r := httptest.NewRequest("GET", "/x", nil)
					if auth != "" {
						r.Header.Set("Authorization", auth)
					}
					if cert != nil {
						r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}
					}
					if protocols != "" {
						r.Header.Set("Connection", "Upgrade")
						r.Header.Set("Upgrade", "websocket")
						r.Header.Add("Sec-WebSocket-Protocol", protocols)
					}
					return r
				}
			}
			reqs := map[string]func() *http.Request{
				"none":        req("", nil, ""),
				"good":        req("Bearer good-token", nil, ""),
				"bad":         req("Bearer bad-token", nil, ""),
				"exp":         req("bearer expired-token", nil, ""),
				"basic":       req("Basic abc", nil, ""),
				"empty":       req("Bearer  x", nil, ""),
				"cert":        req("", signed, ""),
				"strang":      req("", stranger, ""),
				"cert+good":   req("Bearer good-token", signed, ""),
				"strang+good": req("Bearer good-token", stranger, ""),
				"ws":          req("", nil, tok("good-token")+", v4.channel.k8s.io"),
				"wsbad":       req("", nil, tok("bad-token")+", v4.channel.k8s.io"),
				"wsonly":      req("", nil, tok("good-token")),
			}
			names := []string{}
			for n := range reqs {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				r1, r2 := reqs[n](), reqs[n]()
				u1, ok1, err1 := ours.authn(r1)
				resp, ok2, err2 := theirs.AuthenticateRequest(r2)
				s1 := fmt.Sprintf("%v %v %v hdr=%v", ok1, err1 != nil, fmtUser(u1), r1.Header)
				var s2 string
				if resp != nil {
					u := resp.User
					s2 = fmt.Sprintf("%v %v %v hdr=%v", ok2, err2 != nil, fmtUser(&User{Name: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups(), Extra: u.GetExtra()}), r2.Header)
				} else {
					s2 = fmt.Sprintf("%v %v %v hdr=%v", ok2, err2 != nil, fmtUser(nil), r2.Header)
				}
				if s1 != s2 {
					t.Errorf("anon=%v ca=%v %s:\n ours   %s (%v)\n theirs %s (%v)", anon, withCA, n, s1, err1, s2, err2)
				}
				if err1 != nil && err2 != nil && err1.Error() != err2.Error() {
					t.Logf("anon=%v ca=%v %s: errors differ:\n ours   %v\n theirs %v", anon, withCA, n, err1, err2)
				}
			}
		}
	}
}

func fmtUser(u *User) string {
	if u == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%s/%s/%v/%v", u.Name, u.UID, u.Groups, u.Extra)
}

// The same SubjectAccessReview on the wire, and the same decision.
func TestAuthorizationAsUpstream(t *testing.T) {
	for _, both := range []bool{false, true} {
		rv := &reviews{allowed: map[string]bool{"stats": true}, bothAnswers: both}
		c := rv.client(t)
		b := webhookRetryBackoff
		theirs, err := authorizerfactory.DelegatingAuthorizerConfig{SubjectAccessReviewClient: c.AuthorizationV1(), AllowCacheTTL: time.Minute, DenyCacheTTL: time.Minute, WebhookRetryBackoff: &b}.New()
		if err != nil {
			t.Fatal(err)
		}
		ours := newAccessReviewer(c.AuthorizationV1().SubjectAccessReviews(), time.Minute, time.Minute, b, ReviewLimits{})
		u := &User{Name: "alice", UID: "u1", Groups: []string{"g", "system:authenticated"}, Extra: map[string][]string{"k": {"v"}}}
		// The empty verb is a HEAD's (and any method's but GET, POST, PUT,
		// PATCH and DELETE), as upstream's kubelet gives it.
		for _, sv := range [][2]string{{"stats", "get"}, {"proxy", "get"}, {"stats", ""}, {"proxy", ""}} {
			sub, verb := sv[0], sv[1]
			rv.specs = nil
			d1, err1 := ours.authorize(context.Background(), attributes{User: u, Verb: verb, Name: "node-1", Subresource: sub, Path: "/stats/summary"})
			d2, _, err2 := theirs.Authorize(context.Background(), azr.AttributesRecord{User: &user.DefaultInfo{Name: u.Name, UID: u.UID, Groups: u.Groups, Extra: u.Extra},
				Verb: verb, APIVersion: "v1", Resource: "nodes", Subresource: sub, Name: "node-1", ResourceRequest: true, Path: "/stats/summary"})
			if len(rv.specs) != 2 {
				t.Fatalf("%d specs", len(rv.specs))
			}
			a, _ := json.Marshal(rv.specs[0])
			bb, _ := json.Marshal(rv.specs[1])
			if string(a) != string(bb) {
				t.Errorf("specs differ:\n%s\n%s", a, bb)
			}
			m := map[decision]azr.Decision{allow: azr.DecisionAllow, deny: azr.DecisionDeny, noOpinion: azr.DecisionNoOpinion}
			if m[d1] != d2 || (err1 == nil) != (err2 == nil) {
				t.Errorf("both=%v %s: ours %v %v theirs %v %v", both, sub, d1, err1, d2, err2)
			}
		}
	}
}
