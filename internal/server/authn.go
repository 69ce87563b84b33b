package server

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"unicode/utf8"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
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
