// Package dra prepares the devices Dynamic Resource Allocation gave a pod
// (resource.k8s.io/v1 ResourceClaims), as the upstream kubelet does.
//
// Before a pod's containers start, Prepare reads each of its claims from
// the apiserver (named in the spec, or generated from a template and named
// in the pod's status), checks the claim is allocated and reserved for the
// pod, and calls NodePrepareResources on the claim's drivers, registered
// through the plugin watcher (type DRAPlugin, gRPC services dra v1 and
// v1beta1). A claim is prepared once, whatever number of pods use it; the
// CDI device IDs the drivers return go to the containers that reference
// the claim. Once no container of a pod is left, Unprepare drops the pod
// from its claims and calls NodeUnprepareResources for the claims no pod
// uses any more.
//
// The claim cache (which claims, which pods use them, what the drivers
// prepared) is checkpointed in upstream's format after every change, so
// a restarted Skiff still unprepares what it prepared. As upstream, a
// claim read back from the checkpoint is prepared again (drivers are
// idempotent) the next time a pod using it syncs.
//
// A driver away for WipeDelay has its ResourceSlices of the node wiped
// (Wiper). Not done: device health (the DRAResourceHealth stream, gate
// ResourceHealthStatus) and DRA extended resources (gate
// DRAExtendedResource), both alpha and off by default in upstream 1.34;
// Skiff warns when their gates are turned on.
package dra

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/skiff-sh/skiff/internal/metrics"
)

// ClaimGetter reads ResourceClaims from the apiserver.
type ClaimGetter interface {
	Get(ctx context.Context, namespace, name string) (*resourceapi.ResourceClaim, error)
}

// Config configures a Manager.
type Config struct {
	// Dir holds the checkpoint: the root directory, as upstream.
	Dir string
	// Claims reads claims; nil when Skiff runs without an apiserver, and
	// then a pod with claims cannot start.
	Claims  ClaimGetter
	Drivers *Drivers
	Metrics *metrics.DRAMetrics // nil: not recorded
	// Disabled prepares nothing: the DynamicResourceAllocation feature
	// gate is off, and pods run without their claims' devices, as
	// upstream's.
	Disabled bool
}

// claimInfo is a claim in the cache; prepared is not checkpointed.
type claimInfo struct {
	claimState
	prepared bool
}

// Manager prepares and unprepares pods' claims.
type Manager struct {
	cfg Config

	mu     sync.Mutex            // guards claims and the checkpoint
	claims map[string]*claimInfo // by namespace/name
	locks  keyedLocks            // one operation at a time per claim
}

// New reads the checkpoint; an unreadable one stops Skiff, as upstream,
// rather than forget what drivers prepared.
func New(cfg Config) (*Manager, error) {
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("DRA state directory: %w", err)
	}
	states, err := readCheckpoint(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("%w (drain the node and remove the DRA state file)", err)
	}
	m := &Manager{cfg: cfg, claims: map[string]*claimInfo{}}
	for _, s := range states {
		if s.PodUIDs == nil {
			s.PodUIDs = map[string]struct{}{}
		}
		m.claims[s.Namespace+"/"+s.ClaimName] = &claimInfo{claimState: s}
	}
	return m, nil
}

// observe records an operation as upstream's dra_operations_duration_seconds.
func (m *Manager) observe(op string, start time.Time, err error) {
	if m.cfg.Metrics != nil {
		m.cfg.Metrics.Operations.WithLabelValues(op, strconv.FormatBool(err != nil)).Observe(time.Since(start).Seconds())
	}
}

// Prepare prepares the pod's claims; an error means the pod must wait.
func (m *Manager) Prepare(ctx context.Context, pod *v1.Pod) error {
	if len(pod.Spec.ResourceClaims) == 0 || m.cfg.Disabled {
		return nil
	}
	start := time.Now()
	err := m.prepare(ctx, pod)
	m.observe("PrepareResources", start, err)
	if err != nil {
		return fmt.Errorf("prepare dynamic resources: %w", err)
	}
	return nil
}

func (m *Manager) prepare(ctx context.Context, pod *v1.Pod) error {
	if m.preparedFor(pod) {
		return nil
	}
	claims, err := m.podClaims(ctx, pod)
	if err != nil {
		return err
	}
	keys := make([]string, 0, len(claims))
	for _, c := range claims {
		keys = append(keys, c.Namespace+"/"+c.Name)
	}
	defer m.locks.lock(keys)()
	batches, err := m.addPod(pod.UID, claims)
	if err != nil {
		return err
	}
	for name, batch := range batches {
		if err := m.prepareBatch(ctx, name, batch); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, batch := range batches {
		for _, c := range batch {
			m.claims[c.Namespace+"/"+c.Name].prepared = true
		}
	}
	return m.checkpoint()
}

// preparedFor says whether every claim of the pod is prepared and used
// by it already: later syncs of a running pod ask the apiserver nothing.
func (m *Manager) preparedFor(pod *v1.Pod) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range pod.Spec.ResourceClaims {
		name, ok, _, err := claimName(pod, &pod.Spec.ResourceClaims[i])
		if err != nil {
			return false
		}
		if !ok {
			continue
		}
		info := m.claims[pod.Namespace+"/"+name]
		if info == nil || !info.prepared {
			return false
		}
		if _, used := info.PodUIDs[string(pod.UID)]; !used {
			return false
		}
	}
	return true
}

// WaitingFor returns the pods that use a claim of the driver not
// prepared yet: those to sync again at once when the driver registers.
func (m *Manager) WaitingFor(driverName string) []types.UID {
	m.mu.Lock()
	defer m.mu.Unlock()
	var uids []types.UID
	for _, info := range m.claims {
		if _, ok := info.DriverState[driverName]; !ok || info.prepared {
			continue
		}
		for uid := range info.PodUIDs {
			uids = append(uids, types.UID(uid))
		}
	}
	slices.Sort(uids)
	return slices.Compact(uids)
}

// podClaims reads the pod's claims and checks each is the pod's to use.
func (m *Manager) podClaims(ctx context.Context, pod *v1.Pod) ([]*resourceapi.ResourceClaim, error) {
	if m.cfg.Claims == nil {
		return nil, errors.New("the pod has ResourceClaims, which need an apiserver: Skiff runs without one")
	}
	var out []*resourceapi.ResourceClaim
	for i := range pod.Spec.ResourceClaims {
		name, ok, fromTemplate, err := claimName(pod, &pod.Spec.ResourceClaims[i])
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		claim, err := m.cfg.Claims.Get(ctx, pod.Namespace, name)
		if err != nil {
			return nil, fmt.Errorf("fetch ResourceClaim %s: %w", name, err)
		}
		if fromTemplate {
			if err := isOwnedByPod(pod, claim); err != nil {
				return nil, err
			}
		}
		if !isReservedForPod(pod, claim) {
			return nil, fmt.Errorf("pod %s (%s) is not allowed to use ResourceClaim %s (%s)", pod.Name, pod.UID, name, claim.UID)
		}
		if claim.Status.Allocation == nil {
			return nil, fmt.Errorf("ResourceClaim %s: not allocated", name)
		}
		out = append(out, claim)
	}
	return out, nil
}

// addPod records the pod as a user of its claims, checkpoints, and
// returns the claims still to prepare, by driver.
func (m *Manager) addPod(uid types.UID, claims []*resourceapi.ResourceClaim) (map[string][]*drapbv1.Claim, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	batches := map[string][]*drapbv1.Claim{}
	for _, c := range claims {
		key := c.Namespace + "/" + c.Name
		info := m.claims[key]
		if info == nil {
			info = &claimInfo{claimState: claimState{ClaimUID: c.UID, ClaimName: c.Name, Namespace: c.Namespace,
				PodUIDs: map[string]struct{}{}, DriverState: map[string]driverState{}}}
			for _, r := range c.Status.Allocation.Devices.Results {
				info.DriverState[r.Driver] = driverState{}
			}
			m.claims[key] = info
		} else if info.ClaimUID != c.UID {
			return nil, fmt.Errorf("old ResourceClaim with same name %s and different UID %s still exists (previous pod force-deleted?)", c.Name, info.ClaimUID)
		}
		info.PodUIDs[string(uid)] = struct{}{}
		if info.prepared {
			continue
		}
		for name := range info.DriverState {
			batches[name] = append(batches[name], &drapbv1.Claim{Namespace: c.Namespace, UID: string(c.UID), Name: c.Name})
		}
	}
	if err := m.checkpoint(); err != nil {
		return nil, err
	}
	return batches, nil
}

// prepareBatch asks one driver to prepare claims and records its devices.
func (m *Manager) prepareBatch(ctx context.Context, driverName string, claims []*drapbv1.Claim) error {
	drv, err := m.cfg.Drivers.get(driverName)
	if err != nil {
		return err
	}
	resp, err := drv.prepare(ctx, claims)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range claims {
		result, ok := resp.Claims[c.UID]
		if !ok {
			return fmt.Errorf("NodePrepareResources of DRA driver %s skipped ResourceClaim %s", driverName, c.Name)
		}
		if result.GetError() != "" {
			return fmt.Errorf("NodePrepareResources of DRA driver %s failed for ResourceClaim %s: %s", driverName, c.Name, result.Error)
		}
		var devices []device
		for _, d := range result.GetDevices() {
			devices = append(devices, device{PoolName: d.PoolName, DeviceName: d.DeviceName,
				RequestNames: d.RequestNames, CDIDeviceIDs: d.CDIDeviceIDs})
		}
		// Replaced, not appended: a claim prepared again after a restart
		// gets the driver's answer once.
		m.claims[c.Namespace+"/"+c.Name].DriverState[driverName] = driverState{Devices: devices}
	}
	if len(resp.Claims) > len(claims) {
		return fmt.Errorf("NodePrepareResources of DRA driver %s returned results for unknown claims", driverName)
	}
	return nil
}

// checkpoint writes the cache; the caller holds mu.
func (m *Manager) checkpoint() error {
	states := make([]claimState, 0, len(m.claims))
	for _, info := range m.claims {
		states = append(states, info.claimState)
	}
	if err := writeCheckpoint(m.cfg.Dir, states); err != nil {
		return fmt.Errorf("checkpoint ResourceClaim cache: %w", err)
	}
	return nil
}

// keyedLocks serializes operations on the same claims: two pods sharing
// a claim never prepare it twice, and other claims are not held up. A
// claim's lock lives while someone holds or waits for it.
type keyedLocks struct {
	mu    sync.Mutex
	locks map[string]*keyedLock
}

type keyedLock struct {
	sync.Mutex
	refs int
}

// lock takes the keys' locks in order (no deadlock) and returns unlock.
func (l *keyedLocks) lock(keys []string) func() {
	keys = slices.Clone(keys)
	sort.Strings(keys)
	keys = slices.Compact(keys)
	held := make([]*keyedLock, 0, len(keys))
	for _, k := range keys {
		l.mu.Lock()
		if l.locks == nil {
			l.locks = map[string]*keyedLock{}
		}
		kl := l.locks[k]
		if kl == nil {
			kl = &keyedLock{}
			l.locks[k] = kl
		}
		kl.refs++
		l.mu.Unlock()
		kl.Lock()
		held = append(held, kl)
	}
	return func() {
		for i := len(held) - 1; i >= 0; i-- {
			held[i].Unlock()
			l.mu.Lock()
			if held[i].refs--; held[i].refs == 0 {
				delete(l.locks, keys[i])
			}
			l.mu.Unlock()
		}
	}
}
