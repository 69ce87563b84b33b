package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/klog/v2"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
)

// AuthConfig configures NewAuth: the KubeletConfiguration's authentication
// and authorization, and the clients the webhooks use (nil standalone).
type AuthConfig struct {
	NodeName       string
	Authentication kubeletconfig.KubeletAuthentication
	Authorization  kubeletconfig.KubeletAuthorization
	// TokenReviews and SubjectAccessReviews are the apiserver's APIs for
	// the webhooks; nil without an apiserver.
	TokenReviews         authenticationclient.AuthenticationV1Interface
	SubjectAccessReviews authorizationclient.AuthorizationV1Interface
	// ReviewLimits bound the reviews requests cause; unset fields take
	// DefaultReviewLimits.
	ReviewLimits ReviewLimits
}

// webhookRetryBackoff is upstream's DefaultAuthWebhookRetryBackoff.
var webhookRetryBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// Auth authenticates and authorizes requests to the kubelet API as the
// upstream kubelet does: x509 client certificates, bearer tokens through
// TokenReview, anonymous requests when enabled; then AlwaysAllow or a
// SubjectAccessReview on the node's subresource.
type Auth struct {
	authn    authenticator
	authz    authorizer
	nodeName string
	clientCA *clientCA // nil without x509.clientCAFile
}

// NewAuth builds the authenticator and authorizer. As upstream, webhook
// authentication or authorization without an apiserver client is an
// error, and so is a configuration that authenticates nobody.
func NewAuth(cfg AuthConfig) (*Auth, error) {
	a := &Auth{nodeName: cfg.NodeName}
	authn := cfg.Authentication
	var methods []authenticator
	if f := authn.X509.ClientCAFile; f != "" {
		ca, err := newClientCA(f)
		if err != nil {
			return nil, fmt.Errorf("authentication.x509.clientCAFile: %w", err)
		}
		a.clientCA = ca
		methods = append(methods, ca.authenticate)
	}
	if authn.Webhook.Enabled != nil && *authn.Webhook.Enabled {
		if cfg.TokenReviews == nil {
			return nil, errors.New("authentication.webhook.enabled needs an apiserver (--kubeconfig) for its TokenReviews: " +
				"without one, set it to false and use x509 or anonymous authentication")
		}
		tokens := newTokenReviewer(cfg.TokenReviews.TokenReviews(), authn.Webhook.CacheTTL.Duration, webhookRetryBackoff, cfg.ReviewLimits)
		methods = append(methods, bearerToken(tokens), websocketToken(tokens))
	}
	anonymousOn := authn.Anonymous.Enabled != nil && *authn.Anonymous.Enabled
	switch {
	case len(methods) == 0 && anonymousOn:
		a.authn = anonymous
	case len(methods) == 0:
		// Upstream starts this way too (and refuses every request).
		klog.InfoS("Warning: no authentication method configured for the kubelet API (x509.clientCAFile, webhook or anonymous): every request gets 401")
		a.authn = func(*http.Request) (*User, bool, error) { return nil, false, nil }
	case anonymousOn:
		a.authn = orAnonymous(withAuthenticatedGroup(anyOf(methods...)))
	default:
		a.authn = withAuthenticatedGroup(anyOf(methods...))
	}

	authz := cfg.Authorization
	switch authz.Mode {
	case kubeletconfig.KubeletAuthorizationModeAlwaysAllow:
		a.authz = alwaysAllow
	case kubeletconfig.KubeletAuthorizationModeWebhook:
		if cfg.SubjectAccessReviews == nil {
			return nil, errors.New("authorization.mode Webhook needs an apiserver (--kubeconfig) for its SubjectAccessReviews: " +
				"without one, use AlwaysAllow")
		}
		a.authz = newAccessReviewer(cfg.SubjectAccessReviews.SubjectAccessReviews(),
			authz.Webhook.CacheAuthorizedTTL.Duration, authz.Webhook.CacheUnauthorizedTTL.Duration, webhookRetryBackoff, cfg.ReviewLimits).authorize
	default:
		return nil, fmt.Errorf("unknown authorization mode %q", authz.Mode)
	}
	return a, nil
}

// Run reloads the client CA file when it changes, until ctx ends.
func (a *Auth) Run(ctx context.Context) {
	if a.clientCA != nil {
		a.clientCA.run(ctx)
	}
}

// Filter authenticates and authorizes every request before h serves it:
// 401 without a user, 403 when no subresource the request maps to is
// allowed, with upstream's messages.
func (a *Auth) Filter(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Reviews wait their turn by client (reviewGuard).
		r = r.WithContext(withClient(r.Context(), r.RemoteAddr))
		u, ok, err := a.authn(r)
		if errors.Is(err, errTooManyReviews) {
			tooManyRequests(w)
			return
		}
		if err != nil {
			klog.ErrorS(err, "Unable to authenticate the request due to an error")
		}
		if err != nil || !ok {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		attrs := requestAttributes(u, r, a.nodeName)
		var subresources []string
		for _, attr := range attrs {
			subresources = append(subresources, attr.Subresource)
			d, err := a.authz(r.Context(), attr)
			if errors.Is(err, errTooManyReviews) {
				tooManyRequests(w)
				return
			}
			if err != nil {
				klog.ErrorS(err, "Authorization error", "user", u.Name, "verb", attr.Verb,
					"resource", "nodes", "subresource", attr.Subresource)
				http.Error(w, fmt.Sprintf("Authorization error (user=%s, verb=%s, resource=nodes, subresource=%s)",
					u.Name, attr.Verb, attr.Subresource), http.StatusInternalServerError)
				return
			}
			if d == allow {
				h.ServeHTTP(w, r)
				return
			}
		}
		verb := attrs[0].Verb
		klog.V(2).InfoS("Forbidden", "user", u.Name, "verb", verb, "resource", "nodes", "subresource(s)", subresources)
		http.Error(w, fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource(s)=%v)", u.Name, verb, subresources), http.StatusForbidden)
	})
}

// tooManyRequests answers a request refused by a reviewGuard as the
// apiserver answers one over its in-flight limit.
func tooManyRequests(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	http.Error(w, "Too many requests, please try again later.", http.StatusTooManyRequests)
}

// requestAttributes are what the authorizer decides on, as upstream's
// (with KubeletFineGrainedAuthz, on by default since 1.33): the verb from
// the HTTP method, the node as resource nodes/<name>, and the
// subresources the path maps to, any of which allows the request:
//
//	/stats/*              stats
//	/metrics/*            metrics
//	/logs/*               log
//	/checkpoint/*         checkpoint
//	/pods, /runningpods/  pods, proxy
//	/healthz/*            healthz, proxy
//	/configz              configz, proxy
//	anything else         proxy (exec, attach, portForward, run, containerLogs, ...)
func requestAttributes(u *User, r *http.Request, nodeName string) []attributes {
	// Other methods, HEAD among them, get no verb, as upstream's
	// nodeAuthorizerAttributesGetter: a SubjectAccessReview with an
	// empty verb, which only rules for every verb ("*") allow.
	var verb string
	switch r.Method {
	case http.MethodGet:
		verb = "get"
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
	}
	path := r.URL.Path
	var subresources []string
	switch {
	case isSubpath(path, "/pods"), isSubpath(path, "/runningpods"):
		subresources = append(subresources, "pods")
	case isSubpath(path, "/healthz"):
		subresources = append(subresources, "healthz")
	case isSubpath(path, "/configz"):
		subresources = append(subresources, "configz")
	}
	switch {
	case isSubpath(path, "/stats"):
		subresources = append(subresources, "stats")
	case isSubpath(path, "/metrics"):
		subresources = append(subresources, "metrics")
	case isSubpath(path, "/logs"):
		subresources = append(subresources, "log")
	case isSubpath(path, "/checkpoint"):
		subresources = append(subresources, "checkpoint")
	default:
		subresources = append(subresources, "proxy")
	}
	attrs := make([]attributes, 0, len(subresources))
	for _, s := range subresources {
		attrs = append(attrs, attributes{User: u, Verb: verb, Name: nodeName, Subresource: s, Path: path})
	}
	return attrs
}

// isSubpath reports whether p is dir or below it.
func isSubpath(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}
