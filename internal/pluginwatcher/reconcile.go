package pluginwatcher

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// reconcile brings the registrations in line with the sockets in the
// directory and returns when a failed registration is next due (zero:
// none failed).
func (w *Watcher) reconcile(ctx context.Context, fsw *fsnotify.Watcher) time.Time {
	desired, err := w.scanAndWatch(fsw)
	if err != nil {
		klog.ErrorS(err, "Cannot scan the plugin registry")
		return w.cfg.Clock.Now().Add(retryPeriod)
	}
	w.mu.Lock()
	var gone []registration
	for rel, r := range w.registered {
		if s, ok := desired[rel]; !ok || s != r.socket {
			gone = append(gone, r)
			delete(w.registered, rel)
		}
	}
	for rel := range w.failed {
		if _, ok := desired[rel]; !ok {
			delete(w.failed, rel)
		}
	}
	w.mu.Unlock()
	for _, r := range gone {
		klog.InfoS("Deregistering plugin: its socket went or was re-created", "plugin", r.info.Name, "type", r.info.Type, "socket", r.socket.rel)
		w.cfg.Handlers[r.info.Type].Deregister(ctx, r.info)
	}
	var next time.Time
	due := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for rel, s := range desired {
		w.mu.Lock()
		_, done := w.registered[rel]
		f, failed := w.failed[rel]
		w.mu.Unlock()
		failed = failed && f.socket == s // a re-created socket is tried at once
		now := w.cfg.Clock.Now()
		if done || (failed && now.Before(f.due)) {
			if !done {
				due(f.due)
			}
			continue
		}
		info, err := w.register(ctx, s)
		w.mu.Lock()
		if err != nil {
			if !failed {
				f = failure{socket: s}
			}
			f.count++
			f.due = now.Add(backOff(f.count))
			w.failed[rel] = f
			due(f.due)
			klog.ErrorS(err, "Plugin registration failed", "socket", rel, "failures", f.count, "retryIn", backOff(f.count))
		} else {
			delete(w.failed, rel)
			w.registered[rel] = registration{socket: s, info: info}
		}
		w.mu.Unlock()
	}
	return next
}

// failure is a socket whose registration failed count times in a row,
// and when it is tried again.
type failure struct {
	socket socketFile
	count  int
	due    time.Time
}

// backOff is the wait after the n-th failed registration of a socket:
// 1 s doubling to 2 minutes, so that a plugin that never answers does not
// hold the watcher up every second.
func backOff(n int) time.Duration {
	d := retryPeriod
	for i := 1; i < n && d < maxRetryPeriod; i++ {
		d *= 2
	}
	return min(d, maxRetryPeriod)
}

// scanAndWatch scans the registry and watches every subdirectory; a
// directory watched for the first time is scanned again, since a socket
// made in it before the watch began raised no event.
func (w *Watcher) scanAndWatch(fsw *fsnotify.Watcher) (map[string]socketFile, error) {
	for {
		tree, err := scan(w.cfg.Dir)
		if err != nil {
			return nil, err
		}
		present := map[string]bool{}
		for _, d := range tree.dirs {
			present[d] = true
		}
		for d := range w.watched {
			if !present[d] { // gone: a directory made again needs a new watch
				_ = fsw.Remove(filepath.Join(w.cfg.Dir, d))
				delete(w.watched, d)
			}
		}
		added := false
		for _, d := range tree.dirs {
			if w.watched[d] {
				continue
			}
			if err := fsw.Add(filepath.Join(w.cfg.Dir, d)); err != nil {
				klog.V(2).InfoS("Cannot watch a plugin registry subdirectory", "dir", d, "err", err)
				continue
			}
			w.watched[d], added = true, true
		}
		if !added {
			return tree.sockets, nil
		}
	}
}

// register runs the handshake with the plugin behind socket s.
func (w *Watcher) register(ctx context.Context, s socketFile) (Info, error) {
	conn, err := grpc.NewClient("passthrough:///"+s.rel,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(dialer(w.cfg.Dir, s)))
	if err != nil {
		return Info{}, fmt.Errorf("plugin socket %s: %w", s.rel, err)
	}
	defer conn.Close()
	client := registerapi.NewRegistrationClient(conn)
	callCtx, cancel := context.WithTimeout(ctx, callTimeout)
	pi, err := client.GetInfo(callCtx, &registerapi.InfoRequest{})
	cancel()
	if err != nil {
		return Info{}, fmt.Errorf("GetInfo of plugin socket %s: %w", s.rel, err)
	}
	info := Info{Type: pi.Type, Name: pi.Name, Endpoint: pi.Endpoint, Versions: pi.SupportedVersions}
	if info.Endpoint == "" {
		info.Endpoint = filepath.Join(w.cfg.Dir, s.rel)
	}
	regErr := w.handle(ctx, info)
	notifyCtx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	status := &registerapi.RegistrationStatus{PluginRegistered: regErr == nil}
	if regErr != nil {
		status.Error = regErr.Error()
	}
	if _, err := client.NotifyRegistrationStatus(notifyCtx, status); err != nil {
		klog.ErrorS(err, "Cannot tell a plugin its registration status", "plugin", info.Name, "registered", regErr == nil)
		if regErr == nil { // the plugin does not know it is registered: undo
			w.cfg.Handlers[info.Type].Deregister(ctx, info)
			return Info{}, fmt.Errorf("NotifyRegistrationStatus of plugin %s: %w", info.Name, err)
		}
	}
	if regErr != nil {
		return Info{}, regErr
	}
	klog.InfoS("Registered plugin", "plugin", info.Name, "type", info.Type, "endpoint", info.Endpoint, "versions", info.Versions)
	return info, nil
}

// handle validates and registers the plugin with the handler of its type.
func (w *Watcher) handle(ctx context.Context, info Info) error {
	h, ok := w.cfg.Handlers[info.Type]
	if !ok {
		return fmt.Errorf("no handler registered for plugin type: %s at socket of plugin %s", info.Type, info.Name)
	}
	if err := h.Validate(info); err != nil {
		return fmt.Errorf("plugin %s of type %s failed validation: %w", info.Name, info.Type, err)
	}
	if err := h.Register(ctx, info); err != nil {
		return fmt.Errorf("registration of plugin %s of type %s failed: %w", info.Name, info.Type, err)
	}
	return nil
}
