package server

import (
	"encoding/json"
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

// With every TokenReview slot taken, a request with a new token gets
// 429 at once and costs the apiserver nothing; a token the cache knows
// is still served, and once the slots free up new tokens are reviewed
// again.
func TestTokenReviewsInFlightAreBounded(t *testing.T) {
	s := &slowReviews{}
	h := s.auth(t, ReviewLimits{InFlight: 2, QPS: 1000, Burst: 1000}).Filter(okHandler)
	if rec := doRequest(h, "GET", "/pods", "good-token"); rec.Code != 200 {
		t.Fatalf("good token: %d %s", rec.Code, rec.Body)
	}
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = doRequest(h, "GET", "/pods", "slow-"+string(rune('a'+i))).Code
		}()
	}
	s.waitWaiting(t, 2)
	before := s.tokenReviews.Load()
	rec := doRequest(h, "GET", "/pods", "new-token")
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1" {
		t.Errorf("a new token with every slot taken: %d (Retry-After %q) %q, want 429", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	if n := s.tokenReviews.Load(); n != before {
		t.Errorf("the refused request cost %d TokenReviews", n-before)
	}
	if rec := doRequest(h, "GET", "/pods", "good-token"); rec.Code != 200 {
		t.Errorf("a cached token with every slot taken: %d %s, want 200", rec.Code, rec.Body)
	}
	close(s.gate)
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusUnauthorized {
			t.Errorf("slow token %d: %d, want 401", i, c)
		}
	}
	if rec := doRequest(h, "GET", "/pods", "new-token"); rec.Code != http.StatusUnauthorized {
		t.Errorf("a new token once the slots are free: %d, want 401", rec.Code)
	}
}

// Past the burst of the review rate, new tokens get 429 and cost the
// apiserver nothing.
func TestTokenReviewRateIsBounded(t *testing.T) {
	s := &slowReviews{}
	h := s.auth(t, ReviewLimits{InFlight: 10, QPS: 0.001, Burst: 3}).Filter(okHandler)
	var got []int
	for i := 0; i < 5; i++ {
		got = append(got, doRequest(h, "GET", "/pods", "token-"+string(rune('a'+i))).Code)
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
// a request needing another gets 429, while a flood of new tokens
// (which fills the TokenReview slots) does not take them.
func TestAccessReviewsInFlightAreBounded(t *testing.T) {
	s := &slowReviews{}
	h := s.auth(t, ReviewLimits{InFlight: 1, QPS: 1000, Burst: 1000}).Filter(okHandler)
	if rec := doRequest(h, "GET", "/pods", "good-token"); rec.Code != 200 { // token now cached
		t.Fatalf("good token: %d %s", rec.Code, rec.Body)
	}
	s.hold.Store(true)
	done := make(chan int)
	go func() { done <- doRequest(h, "GET", "/stats/summary", "good-token").Code }()
	s.waitWaiting(t, 1)
	before := s.accessReviews.Load()
	if rec := doRequest(h, "GET", "/metrics", "good-token"); rec.Code != http.StatusTooManyRequests {
		t.Errorf("a new access review with its slot taken: %d %q, want 429", rec.Code, rec.Body)
	}
	if n := s.accessReviews.Load(); n != before {
		t.Errorf("the refused request cost %d SubjectAccessReviews", n-before)
	}
	if rec := doRequest(h, "GET", "/pods", "good-token"); rec.Code != 200 {
		t.Errorf("a cached decision with the slot taken: %d, want 200", rec.Code)
	}
	close(s.gate)
	if c := <-done; c != 200 {
		t.Errorf("the held request: %d, want 200", c)
	}
	if rec := doRequest(h, "GET", "/metrics", "good-token"); rec.Code != 200 {
		t.Errorf("once the slot is free: %d, want 200", rec.Code)
	}
}

// Refusals are summed up in the log, not logged one by one.
func TestReviewGuardLogsRefusalsPeriodically(t *testing.T) {
	g := newReviewGuard("TokenReviews", ReviewLimits{InFlight: 1, QPS: 1000, Burst: 1000})
	now := time.Unix(1000, 0)
	g.now = func() time.Time { return now }
	release, err := g.acquire()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if _, err := g.acquire(); err != errTooManyReviews {
			t.Fatalf("acquire %d with the slot taken: %v", i, err)
		}
	}
	// The first refusal was reported at once; four wait for the period.
	if g.refused != 4 {
		t.Errorf("%d refusals pending a report, want 4", g.refused)
	}
	now = now.Add(refusalLogPeriod)
	_, _ = g.acquire()
	if g.refused != 0 {
		t.Errorf("%d refusals pending after the period, want 0", g.refused)
	}
	release()
	if r, err := g.acquire(); err != nil {
		t.Errorf("acquire after release: %v", err)
	} else {
		r()
	}
}
