// Package volumemanager keeps the volumes of the pods a node runs set up,
// as upstream's volume manager does, in three parts:
//
//   - the desired state of the world: every volume of every pod that is to
//     run. WaitForMount adds a pod, TearDownPod removes it.
//   - the actual state of the world: the volumes that are set up, and
//     where they are on the host.
//   - the reconciler (Run): one goroutine that starts a setup operation
//     for each desired volume the actual state lacks, and again on every
//     sync of its pod for each volume whose content follows API objects
//     or whose setup asked for it (Mounted.Remount: a CSI driver's
//     requiresRepublish).
//     At most one operation runs per volume, each in a goroutine of its
//     own with a deadline; a failed one is retried with exponential
//     back-off (0.5 s doubling to 2 min 2 s, as upstream) and reported as
//     a FailedMount event on the pod carrying the cause. So one stuck
//     volume never holds up another volume or another pod.
//
// A pod's containers start once all of its volumes are set up:
// WaitForMount blocks the pod's worker until then, until the worker's
// context ends (the pod must stop), or for at most 2 min 3 s (upstream's
// bound), after which the worker retries the sync. Volumes are torn down
// once the pod's containers have all ended (TearDownVolumes), and the
// pod's directory with them once the pod is gone (TearDownPod).
package volumemanager

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/volume"
)

// Upstream's bounds: how long a pod's worker waits for its volumes, how
// long one setup may take, and the retry back-off of failed setups.
const (
	defaultWaitTimeout = 2*time.Minute + 3*time.Second
	defaultOpTimeout   = 2 * time.Minute
	initialBackOff     = 500 * time.Millisecond
	maxBackOff         = 2*time.Minute + 2*time.Second
	// pendingRetry bounds the back-off of a setup waiting for a
	// precondition (a volume to be attached), which upstream checks
	// every 100 ms from its Node cache: Skiff's check asks the apiserver
	// for the claim and PV, so not that often.
	pendingRetry = 2 * time.Second
)

// Mounter sets up one volume of a pod and tears all of a pod's volumes
// down: with the pod's directory (TearDown) or without it
// (TearDownVolumes). *volume.Manager is one.
type Mounter interface {
	SetUpVolume(ctx context.Context, pod *v1.Pod, vol *v1.Volume) (volume.Mounted, error)
	TearDown(ctx context.Context, uid types.UID) error
	TearDownVolumes(ctx context.Context, uid types.UID) error
}

// Recorder records events on pods.
type Recorder interface {
	Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

// Config configures a Manager.
type Config struct {
	Mounter  Mounter
	Recorder Recorder
	// Expander grows claim volumes in use when their claims grew; nil:
	// none is.
	Expander Expander
	Clock    clock.WithTicker // the real clock when nil
	// WaitTimeout bounds WaitForMount, OpTimeout one setup operation;
	// upstream's when zero.
	WaitTimeout, OpTimeout time.Duration
}

// Manager is the volume manager.
type Manager struct {
	cfg  Config
	kick chan struct{} // wakes the reconciler

	mu      sync.Mutex
	desired map[types.UID]*v1.Pod
	actual  map[volKey]*actualVolume
	ops     map[volKey]*opState
	waiters map[types.UID][]chan struct{} // closed when a volume of the pod is set up
}

// volKey names one volume of one pod.
type volKey struct {
	pod  types.UID
	name string
}

// actualVolume is a volume that is set up. refresh asks for its setup to
// run again (its content follows API objects); expand asks whether its
// claim grew (see expand.go), unless noExpand. It stays usable meanwhile.
type actualVolume struct {
	mounted                   volume.Mounted
	refresh, expand, noExpand bool
}

// opState is the operation state of one volume: running (done is closed
// when it ends), and the failures since its last success, the last one's
// error and when the next attempt may start.
type opState struct {
	done      chan struct{}
	failures  int
	lastErr   error
	notBefore time.Time
}

// New returns a Manager; nothing is set up until Run.
func New(cfg Config) *Manager {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.WaitTimeout <= 0 {
		cfg.WaitTimeout = defaultWaitTimeout
	}
	if cfg.OpTimeout <= 0 {
		cfg.OpTimeout = defaultOpTimeout
	}
	return &Manager{
		cfg: cfg, kick: make(chan struct{}, 1),
		desired: map[types.UID]*v1.Pod{}, actual: map[volKey]*actualVolume{},
		ops: map[volKey]*opState{}, waiters: map[types.UID][]chan struct{}{},
	}
}

// WaitForMount adds the pod to the desired state (its latest spec) and
// waits until every volume of it is set up, returning them by name. A
// volume whose content follows API objects, or that asked for remounts,
// is set up again, without waiting for it. The error names the volumes still missing and why.
func (m *Manager) WaitForMount(ctx context.Context, pod *v1.Pod) (map[string]volume.Mounted, error) {
	m.mu.Lock()
	m.desired[pod.UID] = pod
	for i := range pod.Spec.Volumes {
		if a := m.actual[volKey{pod.UID, pod.Spec.Volumes[i].Name}]; a != nil {
			a.refresh = a.refresh || a.mounted.Remount || volume.Refreshed(&pod.Spec.Volumes[i])
			a.expand = a.expand || (m.expands(&pod.Spec.Volumes[i]) && !a.noExpand)
		}
	}
	m.mu.Unlock()
	m.poke()
	timeout := m.cfg.Clock.NewTimer(m.cfg.WaitTimeout)
	defer timeout.Stop()
	for {
		m.mu.Lock()
		vols, missing := m.mountedLocked(pod)
		if len(missing) == 0 {
			m.mu.Unlock()
			return vols, nil
		}
		ch := make(chan struct{})
		m.waiters[pod.UID] = append(m.waiters[pod.UID], ch)
		m.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for volumes %v: %w", missing, ctx.Err())
		case <-timeout.C():
			return nil, m.timeoutError(pod.UID, missing)
		case <-ch:
		}
	}
}

// mountedLocked returns the pod's set-up volumes and the names of those
// that are not.
func (m *Manager) mountedLocked(pod *v1.Pod) (map[string]volume.Mounted, []string) {
	vols := make(map[string]volume.Mounted, len(pod.Spec.Volumes))
	var missing []string
	for _, v := range pod.Spec.Volumes {
		if a := m.actual[volKey{pod.UID, v.Name}]; a != nil {
			vols[v.Name] = a.mounted
		} else {
			missing = append(missing, v.Name)
		}
	}
	return vols, missing
}

// timeoutError says which volumes are missing, in upstream's words, and
// the last error of each that failed.
func (m *Manager) timeoutError(uid types.UID, missing []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var causes []string
	for _, name := range missing {
		if op := m.ops[volKey{uid, name}]; op != nil && op.lastErr != nil {
			causes = append(causes, fmt.Sprintf("volume %q: %v", name, op.lastErr))
		}
	}
	list := strings.Join(missing, " ")
	err := fmt.Errorf("unmounted volumes=[%s], unattached volumes=[%s], failed to process volumes=[]: %w", list, list, errTimeout)
	if len(causes) > 0 {
		sort.Strings(causes)
		err = fmt.Errorf("%w; last errors: %s", err, strings.Join(causes, "; "))
	}
	return err
}

var errTimeout = errors.New("timed out waiting for the condition")

// TearDownPod removes the pod from the desired state, waits for its
// running operations to end, forgets its volumes and tears them down with
// the pod's directory. It is called once the pod is gone (no source wants
// it and none of its containers is left), and for pod directories nobody
// knows (a pod deleted while Skiff was down).
func (m *Manager) TearDownPod(ctx context.Context, uid types.UID) error {
	if err := m.forget(ctx, uid); err != nil {
		return err
	}
	return m.cfg.Mounter.TearDown(ctx, uid)
}

// TearDownVolumes is TearDownPod for a pod whose containers have all
// ended but which is still known (a Succeeded or Failed pod, kept for
// its status and logs): its volumes are torn down, as upstream does then,
// so that a claim's volume is unpublished, unstaged and free to detach
// while the pod object stays. The pod's directory stays.
func (m *Manager) TearDownVolumes(ctx context.Context, uid types.UID) error {
	if err := m.forget(ctx, uid); err != nil {
		return err
	}
	return m.cfg.Mounter.TearDownVolumes(ctx, uid)
}

// forget removes the pod from the desired state, waits for its running
// operations to end and forgets its volumes.
func (m *Manager) forget(ctx context.Context, uid types.UID) error {
	m.mu.Lock()
	delete(m.desired, uid)
	var running []chan struct{}
	for k, op := range m.ops {
		if k.pod == uid && op.done != nil {
			running = append(running, op.done)
		}
	}
	m.mu.Unlock()
	for _, done := range running {
		select {
		case <-done:
		case <-ctx.Done():
			return fmt.Errorf("waiting for volume operations to end: %w", ctx.Err())
		}
	}
	m.mu.Lock()
	for k := range m.actual {
		if k.pod == uid {
			delete(m.actual, k)
		}
	}
	for k := range m.ops {
		if k.pod == uid {
			delete(m.ops, k)
		}
	}
	delete(m.waiters, uid)
	m.mu.Unlock()
	return nil
}

// RetryNow ends the back-off of every failed volume, for when a cause
// may have gone away at once (a CSI driver registered).
func (m *Manager) RetryNow() {
	m.mu.Lock()
	for _, op := range m.ops {
		op.notBefore = time.Time{}
	}
	m.mu.Unlock()
	m.poke()
}

func (m *Manager) poke() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}
