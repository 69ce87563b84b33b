package server

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"time"

	"golang.org/x/sync/singleflight"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apimachinery/pkg/util/wait"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	"k8s.io/klog/v2"
)

// sharedLookupTimeout bounds a TokenReview that concurrent requests with
// the same token share (apiserver's token cache).
const sharedLookupTimeout = 30 * time.Second

// tokenReviewer authenticates bearer tokens with TokenReviews, as
// apiserver's webhook token authenticator behind its token cache: an
// answer (authenticated or not) is kept for ttl, errors are not; the
// cache is keyed by an HMAC of the token, so tokens are not kept in
// memory; concurrent requests with one token share one review.
type tokenReviewer struct {
	client  authenticationclient.TokenReviewInterface
	backoff wait.Backoff
	ttl     time.Duration
	cache   *utilcache.Expiring
	hmacKey []byte
	group   singleflight.Group
	guard   *reviewGuard
}

type tokenResult struct {
	user *User
	ok   bool
}

func newTokenReviewer(client authenticationclient.TokenReviewInterface, ttl time.Duration, backoff wait.Backoff, limits ReviewLimits) *tokenReviewer {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		panic(err) // crypto/rand does not fail
	}
	return &tokenReviewer{client: client, backoff: backoff, ttl: ttl, cache: utilcache.NewExpiring(), hmacKey: key,
		guard: newReviewGuard("TokenReviews", limits)}
}

func (t *tokenReviewer) authenticate(ctx context.Context, token string) (*User, bool, error) {
	h := hmac.New(sha256.New, t.hmacKey)
	h.Write([]byte(token))
	key := string(h.Sum(nil))
	for {
		if v, ok := t.cache.Get(key); ok {
			r := v.(tokenResult)
			return r.user, r.ok, nil
		}
		// The first request with the token waits for the review's turn
		// with its own context; the review itself is shared, so it is not.
		ch := t.group.DoChan(key, func() (any, error) { return t.lookup(ctx, key, token) })
		select {
		case res := <-ch:
			if errors.Is(res.Err, errClientGone) && ctx.Err() == nil {
				continue // the request that waited left: wait anew
			}
			if res.Err != nil {
				return nil, false, res.Err
			}
			r := res.Val.(tokenResult)
			return r.user, r.ok, nil
		case <-ctx.Done():
			return nil, false, errClientGone
		}
	}
}

// lookup reviews the token once its turn comes (waiting with ctx), and
// caches the answer.
func (t *tokenReviewer) lookup(ctx context.Context, key, token string) (any, error) {
	if v, ok := t.cache.Get(key); ok { // raced with another lookup
		return v, nil
	}
	release, err := t.guard.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sharedLookupTimeout)
	defer cancel()
	u, ok, err := t.review(ctx, token)
	if err != nil {
		return nil, err
	}
	r := tokenResult{u, ok}
	if t.ttl > 0 {
		t.cache.Set(key, r, t.ttl)
	}
	return r, nil
}

// review asks the apiserver, retrying transient failures.
func (t *tokenReviewer) review(ctx context.Context, token string) (*User, bool, error) {
	var result *authenticationv1.TokenReview
	err := withRetries(ctx, t.backoff, func() error {
		var err error
		result, err = t.client.Create(ctx, &authenticationv1.TokenReview{
			Spec: authenticationv1.TokenReviewSpec{Token: token},
		}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		klog.ErrorS(err, "Failed to make webhook authenticator request")
		return nil, false, err
	}
	st := result.Status
	if !st.Authenticated {
		if st.Error != "" {
			return nil, false, errors.New(st.Error)
		}
		return nil, false, nil
	}
	var extra map[string][]string
	if st.User.Extra != nil {
		extra = make(map[string][]string, len(st.User.Extra))
		for k, v := range st.User.Extra {
			extra[k] = v
		}
	}
	return &User{Name: st.User.Username, UID: st.User.UID, Groups: st.User.Groups, Extra: extra}, true, nil
}
