package dra

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
)

// Unprepare drops the pod from its claims and unprepares those no other
// pod uses; it is called once no container of the pod is left. A pod
// without claims costs nothing. An error is retried by the caller.
func (m *Manager) Unprepare(ctx context.Context, uid types.UID) error {
	keys := m.claimsOf(uid)
	if len(keys) == 0 {
		return nil
	}
	start := time.Now()
	err := m.unprepare(ctx, uid, keys)
	m.observe("UnprepareResources", start, err)
	if err != nil {
		return fmt.Errorf("unprepare dynamic resources: %w", err)
	}
	return nil
}

// claimsOf are the keys of the claims the pod uses.
func (m *Manager) claimsOf(uid types.UID) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var keys []string
	for key, info := range m.claims {
		if _, ok := info.PodUIDs[string(uid)]; ok {
			keys = append(keys, key)
		}
	}
	return keys
}

func (m *Manager) unprepare(ctx context.Context, uid types.UID, keys []string) error {
	defer m.locks.lock(keys)()
	batches, err := m.dropPod(uid, keys)
	if err != nil {
		return err
	}
	var errs []error
	failed, all := map[string]bool{}, map[string]bool{}
	for name, claims := range batches {
		err := m.unprepareBatch(ctx, name, claims)
		if err != nil {
			errs = append(errs, err)
		}
		for _, c := range claims {
			key := c.Namespace + "/" + c.Name
			all[key] = true
			failed[key] = failed[key] || err != nil // kept, to be tried again
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for key := range all {
		if !failed[key] {
			delete(m.claims, key)
			klog.V(2).InfoS("Unprepared ResourceClaim", "claim", key)
		}
	}
	if err := m.checkpoint(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// dropPod removes the pod from claims other pods still use and returns,
// by driver, the claims it was the last user of (still cached, with the
// pod, until their drivers unprepared them).
func (m *Manager) dropPod(uid types.UID, keys []string) (map[string][]*drapbv1.Claim, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	batches := map[string][]*drapbv1.Claim{}
	for _, key := range keys {
		info := m.claims[key]
		if info == nil {
			continue
		}
		if _, used := info.PodUIDs[string(uid)]; !used { // changed since claimsOf
			continue
		}
		if len(info.PodUIDs) > 1 {
			delete(info.PodUIDs, string(uid))
			continue
		}
		c := &drapbv1.Claim{Namespace: info.Namespace, UID: string(info.ClaimUID), Name: info.ClaimName}
		for name := range info.DriverState {
			batches[name] = append(batches[name], c)
		}
		if len(info.DriverState) == 0 { // nothing to ask of any driver
			delete(m.claims, key)
		}
	}
	return batches, m.checkpoint()
}

// unprepareBatch asks one driver to unprepare claims.
func (m *Manager) unprepareBatch(ctx context.Context, driverName string, claims []*drapbv1.Claim) error {
	drv, err := m.cfg.Drivers.get(driverName)
	if err != nil {
		return err
	}
	resp, err := drv.unprepare(ctx, claims)
	if err != nil {
		return err
	}
	for _, c := range claims {
		result, ok := resp.Claims[c.UID]
		if !ok {
			return fmt.Errorf("NodeUnprepareResources of DRA driver %s skipped ResourceClaim %s", driverName, c.Name)
		}
		if result.GetError() != "" {
			return fmt.Errorf("NodeUnprepareResources of DRA driver %s failed for ResourceClaim %s: %s", driverName, c.Name, result.Error)
		}
	}
	return nil
}

// Reconcile unprepares the claims of pods no longer active, such as pods
// that went while Skiff was down; active is the set of pods that may
// keep their claims, and complete says whether it is (every pod source
// heard from): until then nothing is unprepared.
func (m *Manager) Reconcile(ctx context.Context, active map[types.UID]bool, complete bool) {
	if !complete {
		return
	}
	m.mu.Lock()
	gone := map[types.UID]bool{}
	for _, info := range m.claims {
		for uid := range info.PodUIDs {
			if !active[types.UID(uid)] {
				gone[types.UID(uid)] = true
			}
		}
	}
	m.mu.Unlock()
	for uid := range gone {
		if err := m.Unprepare(ctx, uid); err != nil {
			klog.ErrorS(err, "Cannot unprepare the ResourceClaims of a pod that is gone; will retry", "podUID", uid)
		}
	}
}
