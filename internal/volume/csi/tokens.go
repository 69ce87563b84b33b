package csi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/utils/ptr"
)

// TokenSource gives service account tokens bound to a pod, cached and
// refreshed as upstream's token manager does (*payload.TokenManager).
type TokenSource interface {
	TokenStatus(ctx context.Context, pod *v1.Pod, audience string, expirationSeconds int64) (authenticationv1.TokenRequestStatus, error)
}

// tokensKey is the volume context key upstream passes the tokens in.
const tokensKey = "csi.storage.k8s.io/serviceAccount.tokens"

var errNoTokens = errors.New("service account tokens need an apiserver, which this Skiff has not")

// withTokens adds to volCtx, when the CSIDriver has tokenRequests, a
// token of the pod's service account for each audience, bound to the
// pod, as upstream does: a JSON object of TokenRequestStatus (token,
// expirationTimestamp) by audience.
func (d *Drivers) withTokens(ctx context.Context, pod *v1.Pod, reqs []storagev1.TokenRequest, volCtx map[string]string) (map[string]string, error) {
	if len(reqs) == 0 {
		return volCtx, nil
	}
	if d.cfg.Tokens == nil {
		return nil, errNoTokens
	}
	out := make(map[string]authenticationv1.TokenRequestStatus, len(reqs))
	for _, r := range reqs {
		st, err := d.cfg.Tokens.TokenStatus(ctx, pod, r.Audience, ptr.Deref(r.ExpirationSeconds, 0))
		if err != nil {
			return nil, fmt.Errorf("service account token for audience %q: %w", r.Audience, err)
		}
		out[r.Audience] = st
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	if volCtx == nil {
		volCtx = map[string]string{}
	}
	volCtx[tokensKey] = string(b)
	return volCtx, nil
}

// RequiresRepublish tells whether the driver's CSIDriver asks for
// NodePublishVolume again on every sync of a pod (requiresRepublish), as
// upstream's RequiresRemount: false when it cannot be read.
func (d *Drivers) RequiresRepublish(ctx context.Context, driver string) bool {
	p, err := d.policy(ctx, driver)
	return err == nil && p.requiresRepublish
}

// republishNow tells whether a volume found published must be published
// again: its driver asks for it and is registered. A driver not
// registered yet leaves the volume as it is until a later sync.
func (d *Drivers) republishNow(ctx context.Context, driver string) bool {
	d.mu.Lock()
	_, registered := d.drivers[driver]
	d.mu.Unlock()
	return registered && d.RequiresRepublish(ctx, driver)
}
