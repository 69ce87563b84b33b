package payload

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testclock "k8s.io/utils/clock/testing"
)

// tokenServer answers TokenRequests like the apiserver: a fresh token per
// request, expiring expirationSeconds (default 3600) from now.
type tokenServer struct {
	clock *testclock.FakeClock
	mu    sync.Mutex
	reqs  []*authenticationv1.TokenRequest
	names []string // service accounts asked for
	fail  error
}

func newTokenManager(t *testing.T) (*TokenManager, *tokenServer) {
	t.Helper()
	srv := &tokenServer{clock: testclock.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))}
	client := fake.NewClientset()
	client.PrependReactor("create", "serviceaccounts", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "token" {
			return false, nil, nil
		}
		create := action.(k8stesting.CreateActionImpl)
		req := create.GetObject().(*authenticationv1.TokenRequest)
		srv.mu.Lock()
		defer srv.mu.Unlock()
		if srv.fail != nil {
			return true, nil, srv.fail
		}
		srv.reqs = append(srv.reqs, req.DeepCopy())
		srv.names = append(srv.names, create.GetNamespace()+"/"+create.Name)
		out := req.DeepCopy()
		exp := int64(3600)
		if out.Spec.ExpirationSeconds != nil {
			exp = *out.Spec.ExpirationSeconds
		}
		out.Spec.ExpirationSeconds = &exp
		out.Status = authenticationv1.TokenRequestStatus{
			Token:               fmt.Sprintf("token-%d", len(srv.reqs)),
			ExpirationTimestamp: metav1.NewTime(srv.clock.Now().Add(time.Duration(exp) * time.Second)),
		}
		return true, out, nil
	})
	m := New(client.CoreV1(), srv.clock)
	m.jitter = func() time.Duration { return 0 }
	return m, srv
}

func (s *tokenServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

func tokenPod(uid types.UID) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-" + string(uid), Namespace: "shop", UID: uid},
		Spec:       v1.PodSpec{ServiceAccountName: "builder"},
	}
}

func mustToken(t *testing.T, m *TokenManager, pod *v1.Pod, aud string, exp int64) string {
	t.Helper()
	tok, err := m.Token(context.Background(), pod, aud, exp)
	if err != nil {
		t.Fatalf("Token: %v", err)
	}
	return tok
}

func TestTokenRequestShape(t *testing.T) {
	m, srv := newTokenManager(t)
	pod := tokenPod("u1")
	if tok := mustToken(t, m, pod, "vault", 7200); tok != "token-1" {
		t.Fatalf("token = %q", tok)
	}
	mustToken(t, m, pod, "", 0)

	if srv.names[0] != "shop/builder" {
		t.Errorf("asked %s, want shop/builder", srv.names[0])
	}
	req := srv.reqs[0].Spec
	ref := req.BoundObjectRef
	if ref == nil || ref.Kind != "Pod" || ref.APIVersion != "v1" || ref.Name != "web-u1" || ref.UID != "u1" {
		t.Errorf("boundObjectRef = %+v", ref)
	}
	if len(req.Audiences) != 1 || req.Audiences[0] != "vault" {
		t.Errorf("audiences = %v", req.Audiences)
	}
	if req.ExpirationSeconds == nil || *req.ExpirationSeconds != 7200 {
		t.Errorf("expirationSeconds = %v", req.ExpirationSeconds)
	}
	// The default audience and lifetime are the apiserver's to pick.
	if def := srv.reqs[1].Spec; def.Audiences != nil || def.ExpirationSeconds != nil {
		t.Errorf("default request = audiences %v, expirationSeconds %v", def.Audiences, def.ExpirationSeconds)
	}
}

func TestTokenCachedUntil80Percent(t *testing.T) {
	m, srv := newTokenManager(t)
	pod := tokenPod("u1")
	first := mustToken(t, m, pod, "", 3600)

	// 79% of the lifetime: still cached.
	srv.clock.Step(2844 * time.Second)
	if tok := mustToken(t, m, pod, "", 3600); tok != first || srv.count() != 1 {
		t.Fatalf("at 79%%: token %q after %d requests, want the cached one", tok, srv.count())
	}
	// Past 80%: refreshed, and the new one is cached in turn.
	srv.clock.Step(37 * time.Second)
	second := mustToken(t, m, pod, "", 3600)
	if second == first || srv.count() != 2 {
		t.Fatalf("past 80%%: token %q after %d requests, want a new one", second, srv.count())
	}
	if tok := mustToken(t, m, pod, "", 3600); tok != second || srv.count() != 2 {
		t.Fatalf("after refresh: token %q after %d requests", tok, srv.count())
	}
}

func TestTokenJitterRefreshesEarly(t *testing.T) {
	m, srv := newTokenManager(t)
	m.jitter = func() time.Duration { return maxJitter }
	pod := tokenPod("u1")
	mustToken(t, m, pod, "", 3600)
	srv.clock.Step(2871 * time.Second) // 80% less 9s: inside the jitter
	mustToken(t, m, pod, "", 3600)
	if srv.count() != 2 {
		t.Fatalf("%d requests, want a refresh within the jitter", srv.count())
	}
}

func TestTokenRefreshedAfter24h(t *testing.T) {
	m, srv := newTokenManager(t)
	pod := tokenPod("u1")
	week := int64(7 * 24 * 3600)
	first := mustToken(t, m, pod, "", week)
	srv.clock.Step(23 * time.Hour)
	if tok := mustToken(t, m, pod, "", week); tok != first {
		t.Fatal("refreshed before 24h")
	}
	srv.clock.Step(time.Hour + time.Second)
	if tok := mustToken(t, m, pod, "", week); tok == first {
		t.Fatal("not refreshed after 24h")
	}
}

func TestTokenSeparateKeys(t *testing.T) {
	m, srv := newTokenManager(t)
	pod := tokenPod("u1")
	a := mustToken(t, m, pod, "a", 3600)
	b := mustToken(t, m, pod, "b", 3600)
	a2 := mustToken(t, m, pod, "a", 7200)
	other := mustToken(t, m, tokenPod("u2"), "a", 3600)
	if srv.count() != 4 {
		t.Fatalf("%d requests, want one per audience, lifetime and pod", srv.count())
	}
	if a == b || a == a2 || a == other {
		t.Fatal("tokens shared across keys")
	}
	if mustToken(t, m, pod, "a", 3600) != a || mustToken(t, m, pod, "b", 3600) != b || srv.count() != 4 {
		t.Fatal("cached tokens not reused per key")
	}
}

func TestTokenForget(t *testing.T) {
	m, srv := newTokenManager(t)
	p1, p2 := tokenPod("u1"), tokenPod("u2")
	mustToken(t, m, p1, "a", 3600)
	mustToken(t, m, p1, "b", 3600)
	mustToken(t, m, p2, "a", 3600)
	m.Forget("u1")
	mustToken(t, m, p1, "a", 3600)
	mustToken(t, m, p2, "a", 3600)
	if srv.count() != 4 {
		t.Fatalf("%d requests, want only u1's token requested again", srv.count())
	}
}

func TestTokenRefreshFailure(t *testing.T) {
	m, srv := newTokenManager(t)
	pod := tokenPod("u1")
	first := mustToken(t, m, pod, "", 3600)
	srv.fail = errors.New("apiserver down")

	// Due for refresh but still valid: the old token is kept.
	srv.clock.Step(3000 * time.Second)
	if tok := mustToken(t, m, pod, "", 3600); tok != first {
		t.Fatalf("token = %q, want the still valid one", tok)
	}
	// Expired: an error.
	srv.clock.Step(601 * time.Second)
	if _, err := m.Token(context.Background(), pod, "", 3600); err == nil || !strings.Contains(err.Error(), "apiserver down") {
		t.Fatalf("err = %v, want the refresh failure", err)
	}
	// A first request failing is an error too.
	if _, err := m.Token(context.Background(), tokenPod("u9"), "", 3600); err == nil || !strings.Contains(err.Error(), "failed to fetch token") {
		t.Fatalf("err = %v", err)
	}
}

func TestTokenStandalone(t *testing.T) {
	m := New(nil, nil)
	if _, err := m.Token(context.Background(), tokenPod("u1"), "", 3600); err == nil || !strings.Contains(err.Error(), "standalone") {
		t.Fatalf("err = %v", err)
	}
}

func TestTokenFuncFeedsProjected(t *testing.T) {
	m, srv := newTokenManager(t)
	pod := tokenPod("u1")
	src := &v1.ProjectedVolumeSource{DefaultMode: i32(0o644), Sources: []v1.VolumeProjection{tokenProjection("token", "", i64(3607))}}
	for range 3 {
		files, err := Projected(src, pod, Getters{}, m.TokenFunc(context.Background(), pod))
		checkErr(t, err, "")
		if string(files["token"].Data) != "token-1" {
			t.Fatalf("token file = %q", files["token"].Data)
		}
	}
	if srv.count() != 1 {
		t.Fatalf("%d requests for repeated setups, want 1", srv.count())
	}
}
