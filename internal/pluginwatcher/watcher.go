// Package pluginwatcher registers node plugins (CSI drivers, DRA drivers)
// that announce themselves with a socket in <root-dir>/plugins_registry,
// as upstream's plugin manager does, with the pluginregistration v1
// handshake: GetInfo tells the plugin's type, name, endpoint and
// versions; the handler of that type validates and registers it; and
// NotifyRegistrationStatus tells the plugin the outcome.
//
// The watcher keeps a desired state (the sockets in the directory, found
// by fsnotify events and a scan that follows no symlink) and an actual
// state (the plugins registered, by socket). A socket that goes
// deregisters its plugin; a socket re-created (a new inode: the plugin
// restarted) deregisters the old registration and registers the new one.
// Registrations that fail are retried with back-off while the socket is
// there, and at once when it is re-created. Every call to a plugin has a
// deadline.
package pluginwatcher

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

const (
	// DirName is the registry directory under the kubelet's root.
	DirName = "plugins_registry"
	// callTimeout bounds each call to a plugin's registration socket.
	callTimeout = 10 * time.Second
	// A failed registration is retried after retryPeriod, doubling up
	// to maxRetryPeriod, while its socket stays the same.
	retryPeriod    = time.Second
	maxRetryPeriod = 2 * time.Minute
)

// Info is what a plugin said of itself in GetInfo.
type Info struct {
	Type, Name string
	// Endpoint is where the plugin serves its own API: GetInfo's
	// endpoint, or the registration socket's path when it gave none.
	Endpoint string
	Versions []string
}

// Handler registers the plugins of one type. Validate refuses a plugin
// before anything is registered; Register may fail (the plugin is told,
// and it is retried); Deregister undoes a successful Register.
type Handler interface {
	Validate(info Info) error
	Register(ctx context.Context, info Info) error
	Deregister(ctx context.Context, info Info)
}

// Config configures a Watcher.
type Config struct {
	// Dir is <root-dir>/plugins_registry; it is made if missing.
	Dir      string
	Handlers map[string]Handler // by plugin type: "CSIPlugin", "DRAPlugin"
	Clock    clock.WithTicker   // the real clock when nil
}

// Watcher watches the registry directory and registers plugins.
type Watcher struct {
	cfg Config

	mu         sync.Mutex
	registered map[string]registration // by socket path relative to Dir
	failed     map[string]failure      // by socket: failed registrations
	watched    map[string]bool         // subdirectories watched; only Run's goroutine
}

// registration is a registered plugin: its socket and what it said.
type registration struct {
	socket socketFile
	info   Info
}

// New returns a Watcher; nothing is watched until Run.
func New(cfg Config) *Watcher {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Watcher{cfg: cfg, registered: map[string]registration{}, failed: map[string]failure{},
		watched: map[string]bool{}}
}

// Run watches and registers until ctx ends; plugins stay registered.
func (w *Watcher) Run(ctx context.Context) error {
	if err := os.MkdirAll(w.cfg.Dir, 0o750); err != nil {
		return fmt.Errorf("plugin registry: %w", err)
	}
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("plugin registry: %w", err)
	}
	defer fsw.Close()
	if err := fsw.Add(w.cfg.Dir); err != nil {
		return fmt.Errorf("watch plugin registry %s: %w", w.cfg.Dir, err)
	}
	klog.InfoS("Watching the plugin registry", "dir", w.cfg.Dir)
	var timer clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		var retry <-chan time.Time
		if next := w.reconcile(ctx, fsw); !next.IsZero() {
			if timer == nil {
				timer = w.cfg.Clock.NewTimer(next.Sub(w.cfg.Clock.Now()))
			} else {
				timer.Stop()
				timer.Reset(next.Sub(w.cfg.Clock.Now()))
			}
			retry = timer.C()
		}
		select {
		case <-ctx.Done():
			return nil
		case ev := <-fsw.Events:
			klog.V(4).InfoS("Plugin registry event", "path", ev.Name, "op", ev.Op)
		case err := <-fsw.Errors:
			klog.ErrorS(err, "Plugin registry watch error")
		case <-retry:
		}
	}
}

// Registered returns the registered plugins of a type.
func (w *Watcher) Registered(typ string) []Info {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []Info
	for _, r := range w.registered {
		if r.info.Type == typ {
			out = append(out, r.info)
		}
	}
	return out
}
