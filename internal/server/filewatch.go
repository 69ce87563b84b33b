package server

import (
	"context"
	"fmt"
	"time"

	"github.com/fsnotify/fsnotify"
	"k8s.io/klog/v2"
)

const (
	// rewatchPeriod is how long a failed watch waits before the next
	// one, with a reload then, as upstream's dynamiccertificates.
	rewatchPeriod = time.Minute
	// A failed reload (a file being written, say) is retried after
	// these, doubling, while the content loaded before stays in use.
	firstReloadRetry = 100 * time.Millisecond
	maxReloadRetry   = time.Minute
)

// watchFiles calls reload whenever one of files changes, until ctx ends,
// as apiserver's dynamiccertificates controllers did for Skiff (the
// client CA file, tlsCertFile and tlsPrivateKeyFile): an inotify watch
// on the files, re-added after a remove or a rename (how editors,
// atomic writers and symlink swaps replace a file), a reload after every
// event and once the watch is set up, and a new watch a minute after one
// fails. reload keeps the old content when the new one is bad, and says
// why in its error.
func watchFiles(ctx context.Context, what string, files []string, reload func() error) {
	w := &fileWatch{what: what, files: files, reload: reload}
	for {
		err := w.watch(ctx)
		if ctx.Err() != nil {
			return
		}
		klog.ErrorS(err, "Failed to watch files, will retry later", "what", what, "files", files)
		w.load() // without a watch, the files are still checked
		rewatch := time.After(rewatchPeriod)
	wait:
		for {
			select {
			case <-ctx.Done():
				return
			case <-w.retry:
				w.load()
			case <-rewatch:
				break wait
			}
		}
	}
}

type fileWatch struct {
	what    string
	files   []string
	reload  func() error
	backoff time.Duration    // the next retry's delay after a failure
	retry   <-chan time.Time // a pending retry; nil when none
}

// load reloads, and schedules a retry when that fails.
func (w *fileWatch) load() {
	if err := w.reload(); err != nil {
		if w.backoff == 0 {
			w.backoff = firstReloadRetry
		}
		klog.ErrorS(err, "Reloading failed; the content loaded before stays in use", "what", w.what, "retryIn", w.backoff)
		w.retry = time.After(w.backoff)
		w.backoff = min(2*w.backoff, maxReloadRetry)
		return
	}
	w.backoff, w.retry = 0, nil
}

// watch loads, then reloads after every event until ctx ends (nil) or
// the watch fails (its error).
func (w *fileWatch) watch(ctx context.Context) error {
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("create an inotify watcher: %w", err)
	}
	defer fsw.Close()
	for _, f := range w.files {
		if err := fsw.Add(f); err != nil {
			return fmt.Errorf("watch %s: %w", f, err)
		}
	}
	w.load() // whatever changed before the watch was set up
	for {
		select {
		case <-ctx.Done():
			return nil
		case e := <-fsw.Events:
			if e.Has(fsnotify.Remove) || e.Has(fsnotify.Rename) {
				_ = fsw.Remove(e.Name) // gone with the file, usually
				if err := fsw.Add(e.Name); err != nil {
					return fmt.Errorf("watch %s again: %w", e.Name, err)
				}
			}
			w.load()
		case err := <-fsw.Errors:
			return fmt.Errorf("inotify: %w", err)
		case <-w.retry:
			w.load()
		}
	}
}
