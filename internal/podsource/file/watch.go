package file

import (
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/fsnotify/fsnotify"
	"k8s.io/klog/v2"
)

// watcher turns inotify events on the manifest directory into resync
// signals. It is a latency optimisation only: the periodic poll alone is
// correct, so every failure here just falls back to polling.
type watcher struct {
	path   string
	signal chan struct{} // capacity 1: pending signals coalesce

	fs      *fsnotify.Watcher
	dir     string // directory being watched, "" when none
	failed  bool   // creating the inotify watcher failed; logged once
	mu      sync.Mutex
	onlyFor string // in single-file mode, the file whose events count
}

func newWatcher(path string) *watcher {
	return &watcher{path: filepath.Clean(path), signal: make(chan struct{}, 1)}
}

// events delivers a value after relevant file system changes.
func (w *watcher) events() <-chan struct{} { return w.signal }

// ensure watches the directory that holds the manifests: the path itself,
// or the parent of a single manifest file (watching the file would lose it
// when an editor replaces it by renaming). While the path does not exist its
// parent is watched for it to appear; if that is missing too, polling
// notices.
func (w *watcher) ensure() {
	dir, only := w.path, ""
	if info, err := os.Stat(w.path); err != nil || !info.IsDir() {
		dir, only = filepath.Dir(w.path), w.path
		if _, err := os.Stat(dir); err != nil {
			dir = ""
		}
	}
	if w.fs == nil && dir != "" {
		if !w.start() {
			return
		}
	}
	if w.fs == nil {
		return
	}
	w.mu.Lock()
	w.onlyFor = only
	w.mu.Unlock()
	// fsnotify drops a watch whose directory was deleted or moved away, so
	// the watch list says whether ours is still live.
	if dir == w.dir && (dir == "" || slices.Contains(w.fs.WatchList(), dir)) {
		return
	}
	if w.dir != "" {
		_ = w.fs.Remove(w.dir) // may already be gone with its directory
	}
	w.dir = ""
	if dir == "" {
		return
	}
	if err := w.fs.Add(dir); err != nil {
		klog.V(2).InfoS("Cannot watch static pod manifest directory, polling only", "path", dir, "err", err)
		return
	}
	w.dir = dir
	klog.V(4).InfoS("Watching static pod manifest directory", "path", dir)
}

func (w *watcher) start() bool {
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		if !w.failed {
			klog.ErrorS(err, "Cannot watch static pod manifests, polling only", "path", w.path)
			w.failed = true
		}
		return false
	}
	w.fs, w.failed = fsw, false
	go w.forward(fsw)
	return true
}

// forward runs until fsw is closed.
func (w *watcher) forward(fsw *fsnotify.Watcher) {
	for {
		select {
		case ev, ok := <-fsw.Events:
			if !ok {
				return
			}
			if w.relevant(ev) {
				w.notify()
			}
		case err, ok := <-fsw.Errors:
			if !ok {
				return
			}
			// Typically an event queue overflow: events were lost, so rescan.
			klog.V(2).InfoS("Static pod manifest watch error", "path", w.path, "err", err)
			w.notify()
		}
	}
}

func (w *watcher) relevant(ev fsnotify.Event) bool {
	w.mu.Lock()
	only := w.onlyFor
	w.mu.Unlock()
	// Every event in a manifest directory counts, hidden files included:
	// ConfigMap-style directories change content by swapping a hidden
	// "..data" symlink.
	return only == "" || filepath.Clean(ev.Name) == only
}

func (w *watcher) notify() {
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

func (w *watcher) close() {
	if w.fs != nil {
		_ = w.fs.Close()
	}
}
