package payload

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Refresh policy of upstream's token manager.
const (
	maxTokenAge = 24 * time.Hour   // refresh a token older than this
	maxJitter   = 10 * time.Second // refresh up to this much early, spreading load
)

// TokenManager requests service account tokens bound to pods through the
// TokenRequest API and caches them, as upstream kubelet's token manager
// does: a cached token is reused until 80% of its lifetime has passed or it
// is 24h old (minus up to 10s of jitter), and if a refresh fails the old
// token is still handed out until it expires.
type TokenManager struct {
	client corev1client.CoreV1Interface
	clock  clock.PassiveClock
	// jitter returns how much earlier than due a token is refreshed;
	// random up to maxJitter, fixed in tests.
	jitter func() time.Duration

	mu    sync.Mutex
	cache map[tokenKey]cachedToken
}

// tokenKey names a token: a pod (by UID, so a recreated pod gets its own),
// its service account, and the request's audience and lifetime.
type tokenKey struct {
	namespace, serviceAccount string
	podName                   string
	podUID                    types.UID
	audience                  string
	expirationSeconds         int64
}

type cachedToken struct {
	token     string
	expiresAt time.Time
	ttl       time.Duration // the lifetime the apiserver granted
}

// New returns a TokenManager using client, nil in standalone mode (every
// request then fails), and clk (nil for the real clock).
func New(client corev1client.CoreV1Interface, clk clock.PassiveClock) *TokenManager {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &TokenManager{
		client: client,
		clock:  clk,
		jitter: func() time.Duration {
			return time.Duration(rand.Float64()*maxJitter.Seconds()) * time.Second
		},
		cache: make(map[tokenKey]cachedToken),
	}
}

// Token returns a token for pod's service account, bound to pod, for
// audience ("" leaves the audience to the apiserver's default) and
// expirationSeconds (0 or less leaves it to the apiserver's default).
func (m *TokenManager) Token(ctx context.Context, pod *v1.Pod, audience string, expirationSeconds int64) (string, error) {
	c, err := m.get(ctx, pod, audience, expirationSeconds)
	return c.token, err
}

// TokenStatus is Token with the token's expiry, as the TokenRequest
// API's status gives both (what CSI drivers' tokenRequests get).
func (m *TokenManager) TokenStatus(ctx context.Context, pod *v1.Pod, audience string, expirationSeconds int64) (authenticationv1.TokenRequestStatus, error) {
	c, err := m.get(ctx, pod, audience, expirationSeconds)
	if err != nil {
		return authenticationv1.TokenRequestStatus{}, err
	}
	return authenticationv1.TokenRequestStatus{Token: c.token, ExpirationTimestamp: metav1.NewTime(c.expiresAt)}, nil
}

// get returns the cached token, or a fresh one when it is due.
func (m *TokenManager) get(ctx context.Context, pod *v1.Pod, audience string, expirationSeconds int64) (cachedToken, error) {
	if pod == nil {
		return cachedToken{}, errNoPod
	}
	if expirationSeconds < 0 {
		expirationSeconds = 0
	}
	key := tokenKey{
		namespace:         pod.Namespace,
		serviceAccount:    pod.Spec.ServiceAccountName,
		podName:           pod.Name,
		podUID:            pod.UID,
		audience:          audience,
		expirationSeconds: expirationSeconds,
	}

	m.mu.Lock()
	m.dropExpiredLocked()
	cached, ok := m.cache[key]
	m.mu.Unlock()
	if ok && !m.needsRefresh(cached) {
		return cached, nil
	}

	// The request runs unlocked: a slow apiserver must not hold up tokens
	// of other pods. Two concurrent refreshes of one key both succeed; the
	// later one is kept.
	fresh, err := m.request(ctx, key)
	if err != nil {
		switch {
		case !ok:
			return cachedToken{}, fmt.Errorf("failed to fetch token: %w", err)
		case m.expired(cached):
			return cachedToken{}, fmt.Errorf("token for pod %s/%s (service account %q) expired and refresh failed: %w",
				key.namespace, key.podName, key.serviceAccount, err)
		default:
			klog.ErrorS(err, "Couldn't update token", "pod", klog.KObj(pod), "serviceAccount", key.serviceAccount)
			return cached, nil
		}
	}
	m.mu.Lock()
	m.cache[key] = fresh
	m.mu.Unlock()
	return fresh, nil
}

// TokenFunc returns a TokenFunc for Projected that asks m on pod's behalf.
func (m *TokenManager) TokenFunc(ctx context.Context, pod *v1.Pod) TokenFunc {
	return func(audience string, expirationSeconds int64) (string, error) {
		return m.Token(ctx, pod, audience, expirationSeconds)
	}
}

// Forget drops every token of the pod, once it is gone.
func (m *TokenManager) Forget(podUID types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	maps.DeleteFunc(m.cache, func(k tokenKey, _ cachedToken) bool { return k.podUID == podUID })
}

func (m *TokenManager) request(ctx context.Context, key tokenKey) (cachedToken, error) {
	if m.client == nil {
		return cachedToken{}, errors.New("cannot use TokenManager when kubelet is in standalone mode")
	}
	req := &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			BoundObjectRef: &authenticationv1.BoundObjectReference{
				Kind:       "Pod",
				APIVersion: "v1",
				Name:       key.podName,
				UID:        key.podUID,
			},
		},
	}
	if key.audience != "" {
		req.Spec.Audiences = []string{key.audience}
	}
	if key.expirationSeconds > 0 {
		exp := key.expirationSeconds
		req.Spec.ExpirationSeconds = &exp
	}
	requestedAt := m.clock.Now()
	tr, err := m.client.ServiceAccounts(key.namespace).CreateToken(ctx, key.serviceAccount, req, metav1.CreateOptions{})
	if err != nil {
		return cachedToken{}, err
	}
	if tr.Status.Token == "" {
		return cachedToken{}, errors.New("the apiserver returned an empty token")
	}
	c := cachedToken{token: tr.Status.Token, expiresAt: tr.Status.ExpirationTimestamp.Time}
	// The lifetime is what the apiserver echoes (it may have shortened
	// the request), as upstream computes the issue time from it.
	switch {
	case tr.Spec.ExpirationSeconds != nil && *tr.Spec.ExpirationSeconds > 0:
		c.ttl = time.Duration(*tr.Spec.ExpirationSeconds) * time.Second
	case key.expirationSeconds > 0:
		c.ttl = time.Duration(key.expirationSeconds) * time.Second
	default:
		c.ttl = c.expiresAt.Sub(requestedAt)
	}
	return c, nil
}

// needsRefresh is upstream's requiresRefresh: past 80% of the lifetime,
// or older than 24h, each brought forward by a random jitter.
func (m *TokenManager) needsRefresh(c cachedToken) bool {
	now := m.clock.Now()
	issuedAt := c.expiresAt.Add(-c.ttl)
	jitter := m.jitter()
	if now.After(issuedAt.Add(maxTokenAge - jitter)) {
		return true
	}
	// Whole seconds, as upstream: 20% of 601s is 120s.
	secs := int64(c.ttl / time.Second)
	return now.After(c.expiresAt.Add(-time.Duration(secs*20/100)*time.Second - jitter))
}

func (m *TokenManager) expired(c cachedToken) bool {
	return m.clock.Now().After(c.expiresAt)
}

// dropExpiredLocked forgets expired tokens; upstream does it every minute
// from a goroutine, here it rides along with requests.
func (m *TokenManager) dropExpiredLocked() {
	for k, c := range m.cache {
		if m.expired(c) {
			delete(m.cache, k)
		}
	}
}
