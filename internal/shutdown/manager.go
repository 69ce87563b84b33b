// Package shutdown stops a node's pods gracefully when the machine shuts
// down, as upstream's node shutdown manager does: it holds a delay
// inhibitor lock of systemd-logind over D-Bus, so that logind waits for it
// before shutting down (at most InhibitDelayMaxSec, which it raises to the
// shutdown's budget through a logind drop-in when lower). On logind's
// PrepareForShutdown(true) the node turns NotReady and refuses new pods,
// the pods stop in priority groups, lowest first, each group within its
// budget, and the lock is released; a PrepareForShutdown(false) (the
// shutdown was cancelled) makes the node Ready again and takes a new lock.
//
//	connect ─► check InhibitDelayMax ─► lock ─► wait ─(true)─► stop pods by group ─► release
//	   ▲                                          ▲                                   │
//	   └──── the bus connection ended (1 s) ──────┴──────────(false): lock again ◄────┘
package shutdown

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Upstream's reasons and messages.
const (
	// Reason and Message are the status of a pod the shutdown stopped, and
	// Message the message of its DisruptionTarget condition.
	Reason  = "Terminated"
	Message = "Pod was terminated in response to imminent node shutdown."
	// NotAdmittedReason and NotAdmittedMessage refuse a pod while the node
	// shuts down.
	NotAdmittedReason  = "NodeShutdown"
	NotAdmittedMessage = "Pod was rejected as the node is shutting down."
	// eventReason is the reason of the Node's events.
	eventReason = "NodeShutdown"
)

// ErrShuttingDown is why the node is not Ready while it shuts down.
var ErrShuttingDown = errors.New("node is shutting down")

const (
	reconnectPeriod = time.Second
	// reloadWait bounds how long logind may take to apply the drop-in
	// after its SIGHUP, which it handles after KillUnit returns.
	reloadWait = 5 * time.Second
)

// EventRecorder records the Node's events; client-go's satisfies it.
type EventRecorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

// Config configures a Manager.
type Config struct {
	// Groups are the priority groups (Groups); none: the manager does
	// nothing.
	Groups []Group
	// Fields are the configuration fields set, named in the warning when
	// logind cannot be reached.
	Fields []string
	// Connect reaches logind; ConnectLogind when nil.
	Connect func(ctx context.Context) (Logind, error)
	// Pods are the pods running now.
	Pods func() []*v1.Pod
	// Kill stops a pod within gracePeriod seconds, marking it Failed with
	// Reason, Message and a DisruptionTarget condition, and returns once
	// it has stopped (or failed to).
	Kill func(ctx context.Context, pod *v1.Pod, gracePeriod int64) error
	// NodeChanged asks for the Node's status to be posted now.
	NodeChanged func()
	Recorder    EventRecorder
	NodeRef     *v1.ObjectReference
	// LogindConfDir is where logind's drop-in goes; LogindConfDir when "".
	LogindConfDir string
	// StatePath is where the last shutdown's start and end times are kept
	// (upstream's StateFile under the root directory); "": nowhere.
	StatePath string
	// Times receives the last shutdown's start and end (zero while it
	// runs) when Run starts and as a shutdown starts and ends; the
	// metrics' setter.
	Times func(start, end time.Time)
	Clock clock.Clock
}

// Manager is the node shutdown manager.
type Manager struct {
	cfg Config

	mu           sync.Mutex
	shuttingDown bool
}

// New returns a Manager; Run runs it.
func New(cfg Config) *Manager {
	if cfg.Connect == nil {
		cfg.Connect = ConnectLogind
	}
	if cfg.LogindConfDir == "" {
		cfg.LogindConfDir = LogindConfDir
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Manager{cfg: cfg}
}

// Status is ErrShuttingDown while the node shuts down, else nil.
func (m *Manager) Status() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.shuttingDown {
		return ErrShuttingDown
	}
	return nil
}

func (m *Manager) setShuttingDown(v bool) {
	m.mu.Lock()
	m.shuttingDown = v
	m.mu.Unlock()
}

// Run holds logind's lock and handles shutdowns until ctx ends, then
// releases the lock. When logind cannot be reached at first, it warns
// that the shutdown fields have no effect and returns, as upstream gives
// up then; a connection lost later is made again every second.
func (m *Manager) Run(ctx context.Context) {
	if len(m.cfg.Groups) == 0 {
		return
	}
	klog.InfoS("Starting the node shutdown manager", "groups", m.cfg.Groups, "budget", Budget(m.cfg.Groups))
	s, err := m.start(ctx)
	if err == nil {
		m.recordLast()
	}
	if err != nil {
		if ctx.Err() == nil {
			klog.InfoS("Warning: graceful node shutdown is unavailable: logind cannot be reached over D-Bus, so these fields have no effect",
				"fields", m.cfg.Fields, "err", err)
		}
		return
	}
	for {
		m.watch(ctx, s)
		for {
			if !m.sleep(ctx, reconnectPeriod) {
				return
			}
			if s, err = m.start(ctx); err == nil {
				break
			}
			klog.ErrorS(err, "Unable to watch the node for shutdown events")
		}
	}
}

// session is one connection to logind and the lock held through it.
type session struct {
	bus    Logind
	events <-chan bool
	lock   io.Closer // nil while none is held
}

func (s *session) release() {
	if s.lock == nil {
		return
	}
	if err := s.lock.Close(); err != nil {
		klog.ErrorS(err, "Failed to release logind's inhibitor lock")
	}
	s.lock = nil
}

// start connects to logind, makes sure its InhibitDelayMax covers the
// budget, watches PrepareForShutdown and takes the lock.
func (m *Manager) start(ctx context.Context) (*session, error) {
	bus, err := m.cfg.Connect(ctx)
	if err != nil {
		return nil, err
	}
	s := &session{bus: bus}
	if err = m.ensureInhibitDelay(ctx, bus); err == nil {
		s.events, err = bus.PrepareForShutdown(ctx)
	}
	if err == nil {
		s.lock, err = bus.Inhibit(ctx)
	}
	if err != nil {
		_ = bus.Close()
		return nil, err
	}
	return s, nil
}

// ensureInhibitDelay raises logind's InhibitDelayMaxSec to the budget when
// lower, as upstream: a drop-in, then SIGHUP through systemd.
func (m *Manager) ensureInhibitDelay(ctx context.Context, bus Logind) error {
	budget := Budget(m.cfg.Groups)
	cur, err := bus.InhibitDelayMax(ctx)
	if err != nil || cur >= budget {
		return err
	}
	klog.InfoS("Raising logind's InhibitDelayMaxSec to the shutdown's budget", "current", cur, "budget", budget, "dir", m.cfg.LogindConfDir)
	if err := writeDropIn(m.cfg.LogindConfDir, budget); err != nil {
		return err
	}
	if err := bus.Reload(ctx); err != nil {
		return err
	}
	deadline := m.cfg.Clock.Now().Add(reloadWait)
	for {
		if cur, err = bus.InhibitDelayMax(ctx); err != nil || cur >= budget {
			return err
		}
		if !m.cfg.Clock.Now().Before(deadline) {
			return fmt.Errorf("logind's InhibitDelayMaxSec is %v after the drop-in set it to %v: it must be at least the shutdown's budget", cur, budget)
		}
		if !m.sleep(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// watch handles logind's signals until ctx ends or the connection does.
func (m *Manager) watch(ctx context.Context, s *session) {
	defer func() { s.release(); _ = s.bus.Close() }()
	for {
		select {
		case <-ctx.Done():
			return
		case active, ok := <-s.events:
			if !ok {
				klog.InfoS("Lost the connection to logind; connecting again")
				return
			}
			m.handle(ctx, s, active)
		}
	}
}

// handle is one PrepareForShutdown.
func (m *Manager) handle(ctx context.Context, s *session, active bool) {
	klog.InfoS("Shutdown manager detected a shutdown event", "shuttingDown", active)
	m.setShuttingDown(active)
	if m.cfg.NodeChanged != nil {
		m.cfg.NodeChanged()
	}
	if !active {
		m.event("Shutdown manager detected shutdown cancellation")
		lock, err := s.bus.Inhibit(ctx)
		if err != nil {
			klog.ErrorS(err, "Failed to take logind's inhibitor lock again after a cancelled shutdown")
			return
		}
		s.release()
		s.lock = lock
		return
	}
	m.event("Shutdown manager detected shutdown event")
	start := m.recordStart()
	var stragglers sync.WaitGroup
	m.stopPods(ctx, &stragglers)
	m.recordEnd(start)
	s.release()
	klog.InfoS("Shutdown manager completed processing shutdown event, node will shutdown shortly")
	stragglers.Wait()
}

func (m *Manager) event(msg string) {
	if m.cfg.Recorder != nil && m.cfg.NodeRef != nil {
		m.cfg.Recorder.Eventf(m.cfg.NodeRef, v1.EventTypeNormal, eventReason, "%s", msg)
	}
}

// sleep waits d on the manager's clock; false if ctx ended first.
func (m *Manager) sleep(ctx context.Context, d time.Duration) bool {
	t := m.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}
