package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/klog/v2"
)

// attributes are what a request is authorized on: the user, the verb
// from the HTTP method, and the node's subresource
// (nodes/<name>/<subresource>, API version v1 of the core group).
type attributes struct {
	User        *User
	Verb        string
	Name        string // the node
	Subresource string
	Path        string
}

// decision is an authorizer's answer.
type decision int

const (
	noOpinion decision = iota
	allow
	deny
)

// authorizer decides on a request's attributes.
type authorizer func(ctx context.Context, a attributes) (decision, error)

func alwaysAllow(context.Context, attributes) (decision, error) { return allow, nil }

// sarCacheSize is the number of answers kept, as apiserver's webhook
// authorizer.
const sarCacheSize = 8192

// maxCachedAttributesSize: attributes longer than this (together) are
// not cached, as apiserver's maxControlledAttrCacheSize.
const maxCachedAttributesSize = 10000

// accessReviewer authorizes with SubjectAccessReviews, as apiserver's
// webhook authorizer (which upstream's kubelet uses): an answer is
// cached by its spec for allowedTTL when allowed and deniedTTL when not;
// errors are not cached.
type accessReviewer struct {
	client                authorizationclient.SubjectAccessReviewInterface
	backoff               wait.Backoff
	allowedTTL, deniedTTL time.Duration
	cache                 *utilcache.LRUExpireCache
	guard                 *reviewGuard
}

func newAccessReviewer(client authorizationclient.SubjectAccessReviewInterface, allowedTTL, deniedTTL time.Duration, backoff wait.Backoff, limits ReviewLimits) *accessReviewer {
	return &accessReviewer{client: client, backoff: backoff, allowedTTL: allowedTTL, deniedTTL: deniedTTL,
		cache: utilcache.NewLRUExpireCache(sarCacheSize), guard: newReviewGuard("SubjectAccessReviews", limits)}
}

func (s *accessReviewer) authorize(ctx context.Context, a attributes) (decision, error) {
	spec := authorizationv1.SubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: a.Verb, Version: "v1", Resource: "nodes", Subresource: a.Subresource, Name: a.Name,
		},
	}
	if u := a.User; u != nil {
		spec.User, spec.UID, spec.Groups = u.Name, u.UID, u.Groups
		if u.Extra != nil {
			spec.Extra = make(map[string]authorizationv1.ExtraValue, len(u.Extra))
			for k, v := range u.Extra {
				spec.Extra[k] = v
			}
		}
	}
	k, err := json.Marshal(spec)
	if err != nil {
		return noOpinion, err
	}
	key := string(k)
	var status authorizationv1.SubjectAccessReviewStatus
	if v, ok := s.cache.Get(key); ok {
		status = v.(authorizationv1.SubjectAccessReviewStatus)
	} else {
		release, err := s.guard.acquire(ctx)
		if err != nil {
			return noOpinion, err
		}
		defer release()
		var result *authorizationv1.SubjectAccessReview
		err = withRetries(ctx, s.backoff, func() error {
			var err error
			result, err = s.client.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
			return err
		})
		if err != nil {
			klog.ErrorS(err, "Failed to make webhook authorizer request")
			return noOpinion, err
		}
		status = result.Status
		if len(a.Verb)+len(a.Name)+len(a.Subresource)+len(a.Path)+len("v1")+len("nodes") < maxCachedAttributesSize {
			ttl := s.deniedTTL
			if status.Allowed {
				ttl = s.allowedTTL
			}
			s.cache.Add(key, status, ttl)
		}
	}
	switch {
	case status.Denied && status.Allowed:
		return deny, errors.New("webhook subject access review returned both allow and deny response")
	case status.Denied:
		return deny, nil
	case status.Allowed:
		return allow, nil
	default:
		return noOpinion, nil
	}
}

// withRetries calls f until it succeeds, fails for good, or the backoff
// runs out, as apiserver's webhook.WithExponentialBackoff with
// DefaultShouldRetry: connection resets, lost HTTP/2 connections,
// internal errors, timeouts, 429s and answers asking the client to wait
// are retried.
func withRetries(ctx context.Context, backoff wait.Backoff, f func() error) error {
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(context.Context) (bool, error) {
		last = f()
		if shouldRetry(last) {
			return false, nil
		}
		return last == nil, last
	})
	switch {
	case last != nil:
		return last
	case err != nil:
		return fmt.Errorf("webhook call failed: %s", err.Error())
	default:
		return nil
	}
}

func shouldRetry(err error) bool {
	if err == nil {
		return false
	}
	if utilnet.IsConnectionReset(err) || utilnet.IsHTTP2ConnectionLost(err) || apierrors.IsInternalError(err) ||
		apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) {
		return true
	}
	_, delay := apierrors.SuggestsClientDelay(err)
	return delay
}
