package server

import (
	"context"
	"encoding/json"
	"errors"
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

// slowReviews is a fake apiserver whose reviews of "slow-*" tokens, and
// of SubjectAccessReviews while held, wait until released. "good-token"
// is alice, whom every SubjectAccessReview allows.
type slowReviews struct {
	gate          chan struct{}
	hold          atomic.Bool // SubjectAccessReviews wait for the gate
	tokenReviews  atomic.Int32
	accessReviews atomic.Int32
	waiting       atomic.Int32
}

func (s *slowReviews) auth(t *testing.T, limits ReviewLimits) *Auth {
	t.Helper()
	c := s.client(t)
	a, err := NewAuth(AuthConfig{
		NodeName: "node-1",
		Authentication: kubeletconfig.KubeletAuthentication{
			Webhook:   kubeletconfig.KubeletWebhookAuthentication{Enabled: ptr.To(true), CacheTTL: metav1.Duration{Duration: time.Minute}},
			Anonymous: kubeletconfig.KubeletAnonymousAuthentication{Enabled: ptr.To(false)},
		},
		Authorization: kubeletconfig.KubeletAuthorization{
			Mode: kubeletconfig.KubeletAuthorizationModeWebhook,
			Webhook: kubeletconfig.KubeletWebhookAuthorization{
				CacheAuthorizedTTL: metav1.Duration{Duration: time.Minute}, CacheUnauthorizedTTL: metav1.Duration{Duration: time.Minute},
			},
		},
		TokenReviews: c.AuthenticationV1(), SubjectAccessReviews: c.AuthorizationV1(),
		ReviewLimits: limits,
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// tokenAuth is an Auth that reviews tokens with s and allows every
// authenticated request, and its token reviewer.
func (s *slowReviews) tokenAuth(t *testing.T, limits ReviewLimits) (*Auth, *tokenReviewer) {
	t.Helper()
	tr := newTokenReviewer(s.client(t).AuthenticationV1().TokenReviews(), time.Minute, webhookRetryBackoff, limits)
	return &Auth{authn: withAuthenticatedGroup(bearerToken(tr)), authz: alwaysAllow, nodeName: "node-1"}, tr
}

func (s *slowReviews) client(t *testing.T) kube.Interface {
	t.Helper()
	s.gate = make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var out any
		switch r.URL.Path {
		case "/apis/authentication.k8s.io/v1/tokenreviews":
			var tr authenticationv1.TokenReview
			_ = json.NewDecoder(r.Body).Decode(&tr)
			s.tokenReviews.Add(1)
			if strings.HasPrefix(tr.Spec.Token, "slow-") {
				s.waiting.Add(1)
				<-s.gate
			}
			if tr.Spec.Token == "good-token" {
				tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "alice"}}
			}
			out = &tr
		case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
			var sar authorizationv1.SubjectAccessReview
			_ = json.NewDecoder(r.Body).Decode(&sar)
			s.accessReviews.Add(1)
			if s.hold.Load() {
				s.waiting.Add(1)
				<-s.gate
			}
			sar.Status.Allowed = sar.Spec.User == "alice"
			out = &sar
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(srv.Close)
	c, err := kube.NewForConfig(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitQueued waits until n requests wait in g's queue.
func waitQueued(t *testing.T, g *reviewGuard, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		g.mu.Lock()
		got := g.queue.waiting
		g.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests queued, want %d", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitWaiting waits until n reviews wait at the fake apiserver.
func (s *slowReviews) waitWaiting(t *testing.T, n int32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.waiting.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d reviews waiting, want %d", s.waiting.Load(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fromClient is a GET of path with token from remoteAddr, bounded by
// ctx.
func fromClient(ctx context.Context, h http.Handler, remoteAddr, path, token string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", path, nil).WithContext(ctx)
	r.RemoteAddr = remoteAddr
	r.Header.Set("Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

// With every TokenReview slot taken, a request with a new token waits
// for a review and costs the apiserver nothing meanwhile; a token the
// cache knows is served at once; a request that leaves while waiting
// costs nothing; once a slot frees up the waiting token is reviewed.
func TestTokenReviewsInFlightAreBounded(t *testing.T) {
	s := &slowReviews{}
	a, tr := s.tokenAuth(t, ReviewLimits{InFlight: 2, QPS: 1000, Burst: 1000})
	h := a.Filter(okHandler)
	if rec := doRequest(h, "GET", "/pods", "good-token"); rec.Code != 200 {
		t.Fatalf("good token: %d %s", rec.Code, rec.Body)
	}
	var wg sync.WaitGroup
	codes := make([]int, 3)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = fromClient(context.Background(), h, "10.0.0.1:100"+string(rune('0'+i)), "/pods", "slow-"+string(rune('a'+i))).Code
		}()
	}
	s.waitWaiting(t, 2)
	before := s.tokenReviews.Load()

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	rec := fromClient(ctx, h, "10.0.0.2:1", "/pods", "leaving-token")
	cancel()
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1" {
		t.Errorf("a request that left while waiting: %d (Retry-After %q) %q, want 429", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		codes[2] = fromClient(context.Background(), h, "10.0.0.3:1", "/pods", "new-token").Code
	}()
	waitQueued(t, tr.guard, 1)
	if rec := doRequest(h, "GET", "/pods", "good-token"); rec.Code != 200 {
		t.Errorf("a cached token with every slot taken: %d %s, want 200", rec.Code, rec.Body)
	}
	if n := s.tokenReviews.Load(); n != before {
		t.Errorf("waiting requests cost %d TokenReviews", n-before)
	}
	close(s.gate)
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusUnauthorized {
			t.Errorf("token %d: %d, want 401 once reviewed", i, c)
		}
	}
	if n := s.tokenReviews.Load(); n != before+1 {
		t.Errorf("%d TokenReviews after the slots freed, want 1 (new-token's)", n-before)
	}
}

// Past the burst of the review rate, a new token waits for the rate: a
// request whose deadline comes first gets 429 and costs nothing.
func TestTokenReviewRateIsBounded(t *testing.T) {
	s := &slowReviews{}
	h := s.auth(t, ReviewLimits{InFlight: 10, QPS: 0.001, Burst: 3}).Filter(okHandler)
	var got []int
	for i := 0; i < 5; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		got = append(got, fromClient(ctx, h, "10.0.0.1:1", "/pods", "token-"+string(rune('a'+i))).Code)
		cancel()
	}
	want := []int{401, 401, 401, 429, 429}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("codes %v, want %v", got, want)
		}
	}
	if n := s.tokenReviews.Load(); n != 3 {
		t.Errorf("%d TokenReviews, want 3", n)
	}
}

// SubjectAccessReviews have slots of their own: with all of them taken,
// a request needing another waits for one, while a cached decision is
// served at once.
func TestAccessReviewsInFlightAreBounded(t *testing.T) {
	s := &slowReviews{}
	h := s.auth(t, ReviewLimits{InFlight: 1, QPS: 1000, Burst: 1000}).Filter(okHandler)
	if rec := doRequest(h, "GET", "/pods", "good-token"); rec.Code != 200 { // token now cached
		t.Fatalf("good token: %d %s", rec.Code, rec.Body)
	}
	s.hold.Store(true)
	held := make(chan int)
	go func() { held <- fromClient(context.Background(), h, "10.0.0.1:1", "/stats/summary", "good-token").Code }()
	s.waitWaiting(t, 1)
	before := s.accessReviews.Load()
	waiting := make(chan int)
	go func() { waiting <- fromClient(context.Background(), h, "10.0.0.2:1", "/metrics", "good-token").Code }()
	if rec := doRequest(h, "GET", "/pods", "good-token"); rec.Code != 200 {
		t.Errorf("a cached decision with the slot taken: %d, want 200", rec.Code)
	}
	if n := s.accessReviews.Load(); n != before {
		t.Errorf("the waiting request cost %d SubjectAccessReviews", n-before)
	}
	close(s.gate)
	if c := <-held; c != 200 {
		t.Errorf("the held request: %d, want 200", c)
	}
	if c := <-waiting; c != 200 {
		t.Errorf("the waiting request: %d, want 200", c)
	}
}

// Refusals are summed up in the log, not logged one by one.
func TestReviewGuardLogsRefusalsPeriodically(t *testing.T) {
	g := newReviewGuard("TokenReviews", ReviewLimits{InFlight: 1, QPS: 1000, Burst: 1000})
	now := time.Unix(1000, 0)
	g.now = func() time.Time { return now }
	release, err := g.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	for i := 0; i < 5; i++ {
		if _, err := g.acquire(gone); !errors.Is(err, errClientGone) {
			t.Fatalf("acquire %d with the slot taken and the client gone: %v", i, err)
		}
	}
	// The first refusal was reported at once; four wait for the period.
	if g.refused != 4 {
		t.Errorf("%d refusals pending a report, want 4", g.refused)
	}
	now = now.Add(refusalLogPeriod)
	_, _ = g.acquire(gone)
	if g.refused != 0 {
		t.Errorf("%d refusals pending after the period, want 0", g.refused)
	}
	release()
	if r, err := g.acquire(context.Background()); err != nil {
		t.Errorf("acquire after release: %v", err)
	} else {
		r()
	}
}
