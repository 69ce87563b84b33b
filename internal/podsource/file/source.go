// Package file is the static pod source: pods defined by manifest files in
// a directory (or a single file) on the node, as upstream's "file" config
// source (--pod-manifest-path / staticPodPath).
package file

import (
	"context"
	"maps"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/podsource"
)

// DefaultPeriod is how often the path is re-read when no file event arrives
// (upstream's fileCheckFrequency).
const DefaultPeriod = 20 * time.Second

// debounceDelay coalesces the burst of events that one save or copy makes.
const debounceDelay = 100 * time.Millisecond

// Config configures a static pod Source.
type Config struct {
	// Path is a directory of manifests, or a single manifest file. It need
	// not exist yet.
	Path string
	// NodeName is this node's name: pods are named <name>-<nodename> and
	// bound to it.
	NodeName string
	// Period is the poll interval backing up file watching; DefaultPeriod
	// when zero.
	Period time.Duration
	// OnError, if set, is called from Run with each manifest (or path)
	// error when it first appears, e.g. to record an Event. It must not
	// block for long.
	OnError func(path string, err error)
}

// Source reads static pod manifests and streams snapshots of their pods.
type Source struct {
	cfg Config
	now func() time.Time

	// Owned by the Run goroutine.
	cache    map[string]*parsed // by file path
	seen     podsource.FirstSeen
	reported map[string]string // last reported error signature by file path
	pathErr  string            // last reported path error
	last     []*v1.Pod         // last snapshot sent
	sent     bool

	mu   sync.Mutex
	errs map[string]error // current errors by file path
}

// New returns a Source for cfg; it does nothing until Run.
func New(cfg Config) *Source {
	if cfg.Period <= 0 {
		cfg.Period = DefaultPeriod
	}
	return &Source{cfg: cfg, now: time.Now}
}

// Errors returns the current error of every manifest that was skipped,
// keyed by file path (or by Config.Path when the path itself is unreadable).
func (s *Source) Errors() map[string]error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.errs)
}

// Run sends a snapshot of the pods on out at once (empty when the path does
// not exist yet, so the kubelet knows this source has spoken), then again
// whenever the set of pods changes, until ctx is done. Call it once.
func (s *Source) Run(ctx context.Context, out chan<- podsource.Update) {
	klog.V(1).InfoS("Watching static pod manifests", "path", s.cfg.Path, "period", s.cfg.Period)
	w := newWatcher(s.cfg.Path)
	defer w.close()

	ticker := time.NewTicker(s.cfg.Period)
	defer ticker.Stop()
	var (
		timer    *time.Timer
		debounce <-chan time.Time
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()

	for {
		// Watch before reading, so no change slips between the two.
		w.ensure()
		if !s.sync(ctx, out) {
			return
		}
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				waiting = false
			case <-debounce:
				debounce = nil
				waiting = false
			case <-w.events():
				// Trailing debounce: wait until the burst has settled.
				if timer == nil {
					timer = time.NewTimer(debounceDelay)
				} else {
					timer.Reset(debounceDelay)
				}
				debounce = timer.C
			}
		}
	}
}

// sync scans and sends a snapshot if it differs from the last one sent. It
// returns false when ctx ended while sending.
func (s *Source) sync(ctx context.Context, out chan<- podsource.Update) bool {
	pods, ok := s.scan()
	if !ok || (s.sent && apiequality.Semantic.DeepEqual(pods, s.last)) {
		return true
	}
	if pods == nil {
		pods = []*v1.Pod{}
	}
	// The receiver owns what it gets; keep our own copy to compare with.
	upd := podsource.Update{Source: podsource.File, Pods: make([]*v1.Pod, len(pods))}
	for i, p := range pods {
		upd.Pods[i] = p.DeepCopy()
	}
	select {
	case out <- upd:
	case <-ctx.Done():
		return false
	}
	s.last, s.sent = pods, true
	return true
}
