package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
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
}

// webhookRetryBackoff is upstream's DefaultAuthWebhookRetryBackoff.
var webhookRetryBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// Auth authenticates and authorizes requests to the kubelet API as the
// upstream kubelet does: x509 client certificates, bearer tokens through
// TokenReview, anonymous requests when enabled; then AlwaysAllow or a
// SubjectAccessReview on the node's subresource.
type Auth struct {
	authn    authenticator.Request
	authz    authorizer.Authorizer
	nodeName string
	clientCA *dynamiccertificates.DynamicFileCAContent // nil without x509.clientCAFile
}

// NewAuth builds the authenticator and authorizer. As upstream, webhook
// authentication or authorization without an apiserver client is an
// error, and so is a configuration that authenticates nobody.
func NewAuth(cfg AuthConfig) (*Auth, error) {
	a := &Auth{nodeName: cfg.NodeName}
	authn := cfg.Authentication
	dc := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous: &apiserver.AnonymousAuthConfig{Enabled: authn.Anonymous.Enabled != nil && *authn.Anonymous.Enabled},
		CacheTTL:  authn.Webhook.CacheTTL.Duration,
	}
	if f := authn.X509.ClientCAFile; f != "" {
		ca, err := dynamiccertificates.NewDynamicCAContentFromFile("client-ca-bundle", f)
		if err != nil {
			return nil, fmt.Errorf("authentication.x509.clientCAFile: %w", err)
		}
		a.clientCA = ca
		dc.ClientCertificateCAContentProvider = ca
	}
	if authn.Webhook.Enabled != nil && *authn.Webhook.Enabled {
		if cfg.TokenReviews == nil {
			return nil, errors.New("authentication.webhook.enabled needs an apiserver (--kubeconfig) for its TokenReviews: " +
				"without one, set it to false and use x509 or anonymous authentication")
		}
		dc.TokenAccessReviewClient = cfg.TokenReviews
		backoff := webhookRetryBackoff
		dc.WebhookRetryBackoff = &backoff
	}
	var err error
	if dc.ClientCertificateCAContentProvider == nil && dc.TokenAccessReviewClient == nil && !dc.Anonymous.Enabled {
		// Upstream starts this way too (and refuses every request).
		klog.InfoS("Warning: no authentication method configured for the kubelet API (x509.clientCAFile, webhook or anonymous): every request gets 401")
		a.authn = authenticator.RequestFunc(func(*http.Request) (*authenticator.Response, bool, error) { return nil, false, nil })
	} else if a.authn, _, err = dc.New(); err != nil {
		return nil, fmt.Errorf("kubelet API authentication: %w", err)
	}

	authz := cfg.Authorization
	switch authz.Mode {
	case kubeletconfig.KubeletAuthorizationModeAlwaysAllow:
		a.authz = authorizerfactory.NewAlwaysAllowAuthorizer()
	case kubeletconfig.KubeletAuthorizationModeWebhook:
		if cfg.SubjectAccessReviews == nil {
			return nil, errors.New("authorization.mode Webhook needs an apiserver (--kubeconfig) for its SubjectAccessReviews: " +
				"without one, use AlwaysAllow")
		}
		backoff := webhookRetryBackoff
		ac := authorizerfactory.DelegatingAuthorizerConfig{
			SubjectAccessReviewClient: cfg.SubjectAccessReviews,
			AllowCacheTTL:             authz.Webhook.CacheAuthorizedTTL.Duration,
			DenyCacheTTL:              authz.Webhook.CacheUnauthorizedTTL.Duration,
			WebhookRetryBackoff:       &backoff,
		}
		if a.authz, err = ac.New(); err != nil {
			return nil, fmt.Errorf("kubelet API authorization: %w", err)
		}
	default:
		return nil, fmt.Errorf("unknown authorization mode %q", authz.Mode)
	}
	return a, nil
}

// Run reloads the client CA file when it changes, until ctx ends.
func (a *Auth) Run(ctx context.Context) {
	if a.clientCA != nil {
		a.clientCA.Run(ctx, 1)
	}
}

// Filter authenticates and authorizes every request before h serves it:
// 401 without a user, 403 when no subresource the request maps to is
// allowed, with upstream's messages.
func (a *Auth) Filter(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, ok, err := a.authn.AuthenticateRequest(r)
		if err != nil {
			klog.ErrorS(err, "Unable to authenticate the request due to an error")
		}
		if err != nil || !ok {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		attrs := requestAttributes(resp.User, r, a.nodeName)
		var subresources []string
		for _, attr := range attrs {
			subresources = append(subresources, attr.GetSubresource())
			decision, _, err := a.authz.Authorize(r.Context(), attr)
			if err != nil {
				klog.ErrorS(err, "Authorization error", "user", attr.GetUser().GetName(), "verb", attr.GetVerb(),
					"resource", attr.GetResource(), "subresource", attr.GetSubresource())
				http.Error(w, fmt.Sprintf("Authorization error (user=%s, verb=%s, resource=%s, subresource=%s)",
					attr.GetUser().GetName(), attr.GetVerb(), attr.GetResource(), attr.GetSubresource()), http.StatusInternalServerError)
				return
			}
			if decision == authorizer.DecisionAllow {
				h.ServeHTTP(w, r)
				return
			}
		}
		u := resp.User.GetName()
		verb := attrs[0].GetVerb()
		klog.V(2).InfoS("Forbidden", "user", u, "verb", verb, "resource", "nodes", "subresource(s)", subresources)
		http.Error(w, fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource(s)=%v)", u, verb, subresources), http.StatusForbidden)
	})
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
func requestAttributes(u user.Info, r *http.Request, nodeName string) []authorizer.Attributes {
	var verb string
	switch r.Method {
	case http.MethodGet, http.MethodHead:
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
	attrs := make([]authorizer.Attributes, 0, len(subresources))
	for _, s := range subresources {
		attrs = append(attrs, authorizer.AttributesRecord{
			User: u, Verb: verb, APIVersion: "v1", Resource: "nodes", Subresource: s,
			Name: nodeName, ResourceRequest: true, Path: path,
		})
	}
	return attrs
}

// isSubpath reports whether p is dir or below it.
func isSubpath(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}
