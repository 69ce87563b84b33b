// Package devicemanager is the device plugin manager (device plugin API
// v1beta1), as the upstream kubelet's:
//
//   - Plugins register on <Dir>/kubelet.sock, which is removed and made
//     again at every start (with every other socket in Dir), so running
//     plugins notice and register again. Each registration is checked
//     (version, resource name, endpoint), then Skiff dials the plugin's
//     socket, reads its options and keeps its ListAndWatch stream open,
//     re-opening it when it ends while the plugin still answers.
//   - A plugin is connected, or stopped (its stream gone, or known only
//     from the checkpoint after a restart). A stopped plugin's devices
//     stay in the Node's capacity but not its allocatable; after the
//     grace period (upstream's five minutes) the resource goes, reported
//     once as removed so the Node's capacity of it is set to zero.
//   - At admission, each container gets the devices of its limits:
//     devices an init container used go to the next containers, the
//     plugin's GetPreferredAllocation is asked when it offers it, then
//     Allocate. Its answer is kept per container and resource and is what
//     the container's CRI config gets (RunOptions), after
//     PreStartContainer when the plugin asks for it.
//   - Assignments and the registered devices are checkpointed in
//     upstream's format (package checkpoint) in Dir, so a restarted Skiff
//     keeps them and never gives a pod's devices to another pod.
package devicemanager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/devicemanager/checkpoint"
)

// DefaultDir is where plugins look for the kubelet: upstream keeps it
// whatever --root-dir says.
const DefaultDir = "/var/lib/kubelet/device-plugins"

const (
	// SocketName is the registration socket's name in Dir.
	SocketName = "kubelet.sock"
	// gracePeriod is how long a stopped plugin's resource stays in the
	// Node's capacity (upstream's endpointStopGracePeriod).
	gracePeriod = 5 * time.Minute
	// maxDevices bounds one plugin's device list: more is taken for
	// garbage, not for hardware.
	maxDevices = 1 << 14
)

// Deadlines of the calls to plugins (variables for the tests' sake):
// dialTimeout bounds connecting, callTimeout every call but
// PreStartContainer, which has upstream's 30 s. Upstream's Allocate has
// none; Skiff's admission waits on it, so it gets one.
var (
	dialTimeout     = 10 * time.Second
	callTimeout     = 10 * time.Second
	preStartTimeout = pluginapi.KubeletPreStartContainerRPCTimeoutInSecs * time.Second
)

// Config configures a Manager.
type Config struct {
	// Dir holds the registration socket, the plugins' sockets and the
	// checkpoint; DefaultDir when empty.
	Dir string
	// Active returns the pods that may keep devices; complete is false
	// until every pod source has been heard from, and then no pod's
	// devices are released for being absent.
	Active func() (pods map[types.UID]bool, complete bool)
	Clock  clock.Clock // the real clock when nil
}

// Manager keeps the device plugins and the devices given to containers.
type Manager struct {
	cfg   Config
	clock clock.Clock
	// allocMu serializes allocations, which call plugins; mu guards the
	// state below and is never held across a call to a plugin.
	allocMu sync.Mutex
	mu      sync.Mutex
	plugins map[string]*plugin                      // by resource
	devices map[string]map[string]*pluginapi.Device // by resource, by ID
	alloc   allocations
	removed []string // resources gone since the last Capacity
	// reopenBackoff is the wait before re-opening an ended ListAndWatch,
	// doubled per failure; maxReopens failures in a row stop the plugin.
	reopenBackoff time.Duration
	maxReopens    int

	server *grpc.Server
	wg     sync.WaitGroup // the plugins' watch loops
	runCtx context.Context
}

// New reads the checkpoint of dir, if any. Nothing listens until Listen.
func New(cfg Config) (*Manager, error) {
	if cfg.Dir == "" {
		cfg.Dir = DefaultDir
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Active == nil {
		return nil, errors.New("devicemanager: Config.Active is required")
	}
	m := &Manager{
		cfg: cfg, clock: cfg.Clock,
		plugins: map[string]*plugin{}, devices: map[string]map[string]*pluginapi.Device{},
		alloc: allocations{}, reopenBackoff: time.Second, maxReopens: 3,
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("device plugin directory: %w", err)
	}
	cp, err := checkpoint.Read(cfg.Dir)
	switch {
	case errors.Is(err, checkpoint.ErrNotFound):
	case err != nil:
		// As upstream: go on without it, loudly.
		klog.ErrorS(err, "Cannot read the device manager checkpoint; device assignments may be lost", "dir", cfg.Dir)
	default:
		m.restore(cp)
	}
	return m, nil
}

// restore takes the checkpoint's assignments, and its resources as
// stopped plugins with no devices: their capacity is zero until the
// plugin registers again, and they go after the grace period.
func (m *Manager) restore(cp checkpoint.Checkpoint) {
	m.alloc.fromCheckpoint(cp.Entries)
	now := m.clock.Now()
	for res := range cp.Registered {
		m.plugins[res] = &plugin{resource: res, stopped: now}
		m.devices[res] = map[string]*pluginapi.Device{}
	}
	klog.InfoS("Read the device manager checkpoint", "assignments", len(cp.Entries), "resources", len(cp.Registered))
}

// writeCheckpoint saves the assignments and each resource's healthy
// devices (none for a stopped plugin), as upstream. Called with mu held.
func (m *Manager) writeCheckpoint() {
	reg := map[string][]string{}
	for res := range m.plugins {
		reg[res] = m.healthyLocked(res)
	}
	if err := checkpoint.Write(m.cfg.Dir, checkpoint.Checkpoint{Entries: m.alloc.toCheckpoint(), Registered: reg}); err != nil {
		klog.ErrorS(err, "Cannot write the device manager checkpoint")
	}
}

// Release forgets a pod's devices: the pod is gone.
func (m *Manager) Release(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.alloc.dropPod(uid) {
		klog.V(2).InfoS("Released the devices of a pod", "podUID", uid)
		m.writeCheckpoint()
	}
}

// releaseInactive releases the devices of pods no longer active, once
// every pod source has been heard from (upstream's UpdateAllocatedDevices).
func (m *Manager) releaseInactive() {
	active, complete := m.cfg.Active()
	if !complete {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	dropped := false
	for _, uid := range m.alloc.pods() {
		if !active[uid] {
			m.alloc.dropPod(uid)
			dropped = true
		}
	}
	if dropped {
		m.writeCheckpoint()
	}
}
