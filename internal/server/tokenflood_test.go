package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
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

// latentReviews is a fake apiserver that takes latency per review.
// Tokens starting with "valid-" are users of that name, whom every
// SubjectAccessReview allows; any other token is not authenticated.
type latentReviews struct {
	latency      time.Duration
	tokenReviews atomic.Int64
}

func (l *latentReviews) auth(t *testing.T) *Auth {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(l.latency)
		var out any
		switch r.URL.Path {
		case "/apis/authentication.k8s.io/v1/tokenreviews":
			var tr authenticationv1.TokenReview
			_ = json.NewDecoder(r.Body).Decode(&tr)
			l.tokenReviews.Add(1)
			if strings.HasPrefix(tr.Spec.Token, "valid-") {
				tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: tr.Spec.Token}}
			}
			out = &tr
		case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
			var sar authorizationv1.SubjectAccessReview
			_ = json.NewDecoder(r.Body).Decode(&sar)
			sar.Status.Allowed = strings.HasPrefix(sar.Spec.User, "valid-")
			out = &sar
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(srv.Close)
	c, err := kube.NewForConfig(&rest.Config{Host: srv.URL, QPS: -1,
		ContentConfig: rest.ContentConfig{ContentType: "application/json"}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAuth(AuthConfig{
		NodeName: "node-1",
		Authentication: kubeletconfig.KubeletAuthentication{
			// Upstream's default cache TTL.
			Webhook:   kubeletconfig.KubeletWebhookAuthentication{Enabled: ptr.To(true), CacheTTL: metav1.Duration{Duration: 2 * time.Minute}},
			Anonymous: kubeletconfig.KubeletAnonymousAuthentication{Enabled: ptr.To(false)},
		},
		Authorization: kubeletconfig.KubeletAuthorization{
			Mode: kubeletconfig.KubeletAuthorizationModeWebhook,
			Webhook: kubeletconfig.KubeletWebhookAuthorization{
				CacheAuthorizedTTL: metav1.Duration{Duration: 5 * time.Minute}, CacheUnauthorizedTTL: metav1.Duration{Duration: 30 * time.Second},
			},
		},
		TokenReviews: c.AuthenticationV1(), SubjectAccessReviews: c.AuthorizationV1(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// clientRequest is a GET of path with a bearer token from remoteAddr
// (a client's address and port: one connection), bounded by ctx.
func clientRequest(ctx context.Context, h http.Handler, remoteAddr, path, token string) int {
	r := httptest.NewRequest(http.MethodGet, path, nil).WithContext(ctx)
	r.RemoteAddr = remoteAddr
	r.Header.Set("Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec.Code
}

// junkFlood sends requests with a new random token each from conns
// connections of addr, as fast as they are answered, until ctx ends.
type junkFlood struct {
	sent, served atomic.Int64
	wg           sync.WaitGroup
}

func startJunkFlood(ctx context.Context, h http.Handler, addr string, conns int) *junkFlood {
	f := &junkFlood{}
	for i := 0; i < conns; i++ {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			remote := fmt.Sprintf("%s:%d", addr, 20000+i)
			tok := make([]byte, 16)
			for ctx.Err() == nil {
				_, _ = rand.Read(tok)
				f.sent.Add(1)
				if clientRequest(ctx, h, remote, "/pods", "junk-"+hex.EncodeToString(tok)) == http.StatusOK {
					f.served.Add(1)
				}
			}
		}()
	}
	return f
}

// A flood of junk tokens from one pod's address, from many connections
// at once, must not lock out valid clients whose tokens the kubelet has
// not seen yet: metrics-server and Prometheus from addresses of their
// own, a client sharing the flood's address on a connection of its own,
// and a client whose token was cached before the flood. Each may wait
// its turn for a review (bounded here by a generous deadline, not a
// timing assertion) but must be served.
func TestTokenFloodKeepsValidClientsServed(t *testing.T) {
	rv := &latentReviews{latency: 5 * time.Millisecond}
	h := rv.auth(t).Filter(okHandler)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if c := clientRequest(ctx, h, "10.0.0.9:5000", "/stats/summary", "valid-cached"); c != http.StatusOK {
		t.Fatalf("a valid token before the flood: %d", c)
	}

	floodCtx, stopFlood := context.WithCancel(ctx)
	flood := startJunkFlood(floodCtx, h, "10.0.0.66", 64)
	defer func() { stopFlood(); flood.wg.Wait() }()
	// Past the review rate's burst, so the flood holds every review slot.
	for rv.tokenReviews.Load() < 200 {
		if ctx.Err() != nil {
			t.Fatalf("the flood caused only %d TokenReviews", rv.tokenReviews.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}

	for _, c := range []struct{ name, remote, path, token string }{
		{"metrics-server from its own address", "10.0.0.7:40001", "/metrics/resource", "valid-metrics-server"},
		{"Prometheus from its own address", "10.0.0.8:40002", "/metrics", "valid-prometheus"},
		{"Prometheus's stats scrape", "10.0.0.8:40003", "/stats/summary", "valid-prometheus-2"},
		{"a client sharing the flood's address", "10.0.0.66:50000", "/metrics/resource", "valid-neighbour"},
		{"a token cached before the flood", "10.0.0.9:5001", "/stats/summary", "valid-cached"},
	} {
		reqCtx, done := context.WithTimeout(ctx, 20*time.Second)
		code := clientRequest(reqCtx, h, c.remote, c.path, c.token)
		done()
		if code != http.StatusOK {
			t.Errorf("%s during the flood: %d, want 200", c.name, code)
		}
	}
	stopFlood()
	flood.wg.Wait()
	t.Logf("flood: %d junk requests, %d TokenReviews in all", flood.sent.Load(), rv.tokenReviews.Load())
	if n := flood.served.Load(); n > 0 {
		t.Errorf("%d junk requests were served", n)
	}
}
