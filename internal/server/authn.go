package server

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"golang.org/x/sync/singleflight"
	authenticationv1 "k8s.io/api/authentication/v1"
	asn1util "k8s.io/apimachinery/pkg/apis/asn1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
	"k8s.io/apimachinery/pkg/util/wait"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"
)

// The users and groups the apiserver's authentication gives the
// kubelet's requests (k8s.io/apiserver/pkg/authentication/user).
const (
	anonymousUser      = "system:anonymous"
	authenticatedGroup = "system:authenticated"
	unauthenticated    = "system:unauthenticated"
	// credentialIDKey is the extra key naming the credential, here a
	// client certificate's fingerprint.
	credentialIDKey = "authentication.kubernetes.io/credential-id"
)

// User is who made a request.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// authenticator is one way to authenticate a request: a user and true,
// or false when the request does not carry this kind of credential, or
// an error when it carries a bad one.
type authenticator func(r *http.Request) (*User, bool, error)

// anyOf tries each authenticator in turn, as apiserver's union: the
// first user wins; errors are collected and returned when none
// authenticates.
func anyOf(as ...authenticator) authenticator {
	if len(as) == 1 {
		return as[0]
	}
	return func(r *http.Request) (*User, bool, error) {
		return firstUser(as, func(a authenticator) (*User, bool, error) { return a(r) })
	}
}

// firstUser is the first user f finds in xs, or the errors it met.
func firstUser[T any](xs []T, f func(T) (*User, bool, error)) (*User, bool, error) {
	var errs []error
	for _, x := range xs {
		u, ok, err := f(x)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			return u, true, nil
		}
	}
	return nil, false, utilerrors.NewAggregate(errs)
}

// withAuthenticatedGroup adds system:authenticated to the groups of
// every user but the anonymous one, as apiserver's
// AuthenticatedGroupAdder.
func withAuthenticatedGroup(a authenticator) authenticator {
	return func(r *http.Request) (*User, bool, error) {
		u, ok, err := a(r)
		if err != nil || !ok {
			return nil, ok, err
		}
		if u.Name == anonymousUser {
			return u, true, nil
		}
		for _, g := range u.Groups {
			if g == authenticatedGroup || g == unauthenticated {
				return u, true, nil
			}
		}
		groups := append(append(make([]string, 0, len(u.Groups)+1), u.Groups...), authenticatedGroup)
		return &User{Name: u.Name, UID: u.UID, Groups: groups, Extra: u.Extra}, true, nil
	}
}

// anonymous authenticates every request as system:anonymous.
func anonymous(*http.Request) (*User, bool, error) {
	return &User{Name: anonymousUser, Groups: []string{unauthenticated}}, true, nil
}

// orAnonymous falls back to anonymous when a finds no credentials, but
// not when it finds bad ones (apiserver's union with FailOnError).
func orAnonymous(a authenticator) authenticator {
	return func(r *http.Request) (*User, bool, error) {
		u, ok, err := a(r)
		if err != nil || ok {
			return u, ok, err
		}
		return anonymous(r)
	}
}

// clientCA verifies client certificates against
// authentication.x509.clientCAFile, reloaded when the file changes.
type clientCA struct {
	file   string
	bundle atomic.Pointer[caBundle]
}

type caBundle struct {
	pem  []byte
	opts x509.VerifyOptions
}

// newClientCA loads the CA file; Run keeps it fresh.
func newClientCA(file string) (*clientCA, error) {
	c := &clientCA{file: file}
	if err := c.load(); err != nil {
		return nil, err
	}
	return c, nil
}

// load reads the file, and uses it when it changed and holds
// certificates; otherwise the bundle loaded before stays.
func (c *clientCA) load() error {
	b, err := os.ReadFile(c.file)
	if err != nil {
		return err
	}
	if len(b) == 0 {
		return fmt.Errorf("missing content for CA bundle %q", c.file)
	}
	if cur := c.bundle.Load(); cur != nil && bytes.Equal(cur.pem, b) {
		return nil
	}
	pool, err := certutil.NewPoolFromBytes(b)
	if err != nil {
		return fmt.Errorf("error loading CA bundle %q: %w", c.file, err)
	}
	c.bundle.Store(&caBundle{pem: b, opts: x509.VerifyOptions{
		Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}})
	klog.V(2).InfoS("Loaded a new client CA bundle", "file", c.file)
	return nil
}

// run reloads the file when it changes, until ctx ends.
func (c *clientCA) run(ctx context.Context) {
	watchFiles(ctx, "client CA", []string{c.file}, c.load)
}

// authenticate is apiserver's x509 authenticator with
// CommonNameUserConversion: a certificate chaining to the CA (through
// the other certificates the client sent) for client auth is the user
// of its common name, in the groups of its organizations, with the UID
// of its UID attribute (AllowParsingUserUIDFromCertAuth, on by default
// in 1.34) and its fingerprint as credential ID.
func (c *clientCA) authenticate(r *http.Request) (*User, bool, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return nil, false, nil
	}
	opts := c.bundle.Load().opts
	certs := r.TLS.PeerCertificates
	if len(certs) > 1 {
		opts.Intermediates = x509.NewCertPool()
		for _, ic := range certs[1:] {
			opts.Intermediates.AddCert(ic)
		}
	}
	chains, err := certs[0].Verify(opts)
	if err != nil {
		return nil, false, fmt.Errorf("verifying certificate %s failed: %w", certificateIdentifier(certs[0]), err)
	}
	return firstUser(chains, func(chain []*x509.Certificate) (*User, bool, error) { return certificateUser(chain[0]) })
}

var uidOID = asn1util.X509UID()

func certificateUser(c *x509.Certificate) (*User, bool, error) {
	if c.Subject.CommonName == "" {
		return nil, false, nil
	}
	var uids []string
	for _, n := range c.Subject.Names {
		if !n.Type.Equal(uidOID) {
			continue
		}
		uid, ok := n.Value.(string)
		if !ok {
			return nil, false, errors.New("unable to parse UID into a string")
		}
		uids = append(uids, uid)
	}
	var uid string
	switch {
	case len(uids) > 1:
		return nil, false, fmt.Errorf("expected 1 UID, but found multiple: %v", uids)
	case len(uids) == 1 && uids[0] == "":
		return nil, false, errors.New("UID cannot be an empty string")
	case len(uids) == 1:
		uid = uids[0]
	}
	fp := sha256.Sum256(c.Raw)
	return &User{
		Name: c.Subject.CommonName, UID: uid, Groups: c.Subject.Organization,
		Extra: map[string][]string{credentialIDKey: {"X509SHA256=" + hex.EncodeToString(fp[:])}},
	}, true, nil
}

// certificateIdentifier names a certificate in errors, as apiserver does.
func certificateIdentifier(c *x509.Certificate) string {
	return fmt.Sprintf("SN=%d, SKID=%s, AKID=%s", c.SerialNumber, colonHex(c.SubjectKeyId), colonHex(c.AuthorityKeyId))
}

func colonHex(b []byte) string {
	parts := make([]string, len(b))
	for i, x := range b {
		parts[i] = fmt.Sprintf("%02X", x)
	}
	return strings.Join(parts, ":")
}

var errInvalidToken = errors.New("invalid bearer token")

// bearerToken authenticates the token of an "Authorization: Bearer"
// header through tokens, and removes the header once it has (nothing
// further, such as the streaming proxy, should see it).
func bearerToken(tokens *tokenReviewer) authenticator {
	return func(r *http.Request) (*User, bool, error) {
		auth := strings.TrimSpace(r.Header.Get("Authorization"))
		if auth == "" {
			return nil, false, nil
		}
		parts := strings.SplitN(auth, " ", 3)
		if len(parts) < 2 || strings.ToLower(parts[0]) != "bearer" || parts[1] == "" {
			return nil, false, nil
		}
		u, ok, err := tokens.authenticate(r.Context(), parts[1])
		if ok {
			r.Header.Del("Authorization")
		}
		if !ok && err == nil {
			err = errInvalidToken
		}
		return u, ok, err
	}
}

// bearerProtocolPrefix carries a token in a WebSocket subprotocol
// (browsers cannot set headers on WebSocket requests).
const bearerProtocolPrefix = "base64url.bearer.authorization.k8s.io."

// websocketToken authenticates the token of a WebSocket request's
// base64url.bearer.authorization.k8s.io.<token> subprotocol, and removes
// that subprotocol once it has, as apiserver's ProtocolAuthenticator.
func websocketToken(tokens *tokenReviewer) authenticator {
	const header = "Sec-Websocket-Protocol"
	return func(r *http.Request) (*User, bool, error) {
		if !wsstream.IsWebSocketRequest(r) {
			return nil, false, nil
		}
		token, saw := "", false
		var others []string
		for _, h := range r.Header[header] {
			for _, p := range strings.Split(h, ",") {
				p = strings.TrimSpace(p)
				if !strings.HasPrefix(p, bearerProtocolPrefix) {
					others = append(others, p)
					continue
				}
				if saw {
					return nil, false, errors.New("multiple base64.bearer.authorization tokens specified")
				}
				saw = true
				b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(p, bearerProtocolPrefix))
				if err != nil {
					return nil, false, errors.New("invalid base64.bearer.authorization token encoding")
				}
				if !utf8.Valid(b) {
					return nil, false, errors.New("invalid base64.bearer.authorization token")
				}
				token = string(b)
			}
		}
		// Another subprotocol must remain to be echoed back.
		if token != "" && len(others) == 0 {
			return nil, false, errors.New("missing additional subprotocol")
		}
		if token == "" {
			return nil, false, nil
		}
		u, ok, err := tokens.authenticate(r.Context(), token)
		if ok {
			r.Header.Set(header, strings.Join(others, ","))
		}
		if !ok && err == nil {
			err = errInvalidToken
		}
		return u, ok, err
	}
}

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
	if v, ok := t.cache.Get(key); ok {
		r := v.(tokenResult)
		return r.user, r.ok, nil
	}
	ch := t.group.DoChan(key, func() (any, error) {
		if v, ok := t.cache.Get(key); ok { // raced with another lookup
			return v, nil
		}
		release, err := t.guard.acquire()
		if err != nil {
			return nil, err
		}
		defer release()
		// Shared by several requests: not bound to this one's context.
		ctx, cancel := context.WithTimeout(context.Background(), sharedLookupTimeout)
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
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return nil, false, res.Err
		}
		r := res.Val.(tokenResult)
		return r.user, r.ok, nil
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
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
