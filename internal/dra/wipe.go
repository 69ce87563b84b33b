package dra

import (
	"context"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// WipeDelay is how long a DRA driver may be away (deregistered, or its
// socket not connected) before its ResourceSlices of the node are
// deleted: long enough for a driver's pod to be replaced, short enough
// that few pods are scheduled to devices nobody prepares. Upstream's.
const WipeDelay = 30 * time.Second

// SliceDeleter deletes ResourceSlices: the apiserver's.
type SliceDeleter interface {
	DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error
}

// WiperConfig configures a Wiper.
type WiperConfig struct {
	Slices   SliceDeleter
	NodeName string
	Clock    clock.Clock // nil: the real clock
	Delay    time.Duration
}

// A Wiper deletes the ResourceSlices of this node as upstream's kubelet
// does: all of them when Skiff starts (no driver has registered yet, and
// a driver that does not come back must not keep pods coming), and a
// driver's once it has been away for the delay. Slices are published by
// the drivers; nothing else on the node would remove a gone driver's.
type Wiper struct {
	cfg  WiperConfig
	kick chan struct{}

	mu  sync.Mutex
	due map[string]time.Time // driver → when to wipe its slices
}

// NewWiper returns a Wiper; nothing is deleted until Run.
func NewWiper(cfg WiperConfig) *Wiper {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Delay <= 0 {
		cfg.Delay = WipeDelay
	}
	return &Wiper{cfg: cfg, kick: make(chan struct{}, 1), due: map[string]time.Time{}}
}

// Available records whether a driver is usable: one that is not gets its
// slices wiped after the delay, unless it is usable again by then. A
// wipe already due keeps its time.
func (w *Wiper) Available(driver string, usable bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if usable {
		delete(w.due, driver)
	} else if _, ok := w.due[driver]; !ok {
		w.due[driver] = w.cfg.Clock.Now().Add(w.cfg.Delay)
		klog.V(2).InfoS("DRA driver unavailable; its ResourceSlices are wiped unless it comes back", "driver", driver, "delay", w.cfg.Delay)
	}
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// Run wipes the node's slices once, then each driver's when it is due,
// until ctx ends.
func (w *Wiper) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	w.wipe(ctx, "", func() bool { return true })
	for {
		next, ready := w.takeDue()
		for _, driver := range ready {
			wg.Add(1)
			go func() { defer wg.Done(); w.wipe(ctx, driver, func() bool { return w.stillAway(driver) }) }()
		}
		var tick <-chan time.Time
		if next > 0 {
			// A new timer per round: rounds are few (a driver's
			// comings and goings), and each lasts at most the delay.
			tick = w.cfg.Clock.After(next)
		}
		select {
		case <-ctx.Done():
			return
		case <-w.kick:
		case <-tick:
		}
	}
}

// takeDue returns the drivers whose wipe is due (marked as started: their
// due time is zero) and how long until the next one (0: none).
func (w *Wiper) takeDue() (time.Duration, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.cfg.Clock.Now()
	var ready []string
	var next time.Duration
	for driver, at := range w.due {
		switch {
		case at.IsZero(): // being wiped
		case !at.After(now):
			ready = append(ready, driver)
			w.due[driver] = time.Time{}
		case next == 0 || at.Sub(now) < next:
			next = at.Sub(now)
		}
	}
	return next, ready
}

// stillAway says whether a driver's wipe that started is still wanted:
// not if the driver came back since (and maybe went again: a new wipe
// is then due after its own delay).
func (w *Wiper) stillAway(driver string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.due[driver]
	return ok && at.IsZero()
}

// wipe deletes the node's slices (of one driver, or of all for ""),
// retrying with back-off while wanted says so and ctx lasts.
func (w *Wiper) wipe(ctx context.Context, driver string, wanted func() bool) {
	sel := fields.Set{resourceapi.ResourceSliceSelectorNodeName: w.cfg.NodeName}
	if driver != "" {
		sel[resourceapi.ResourceSliceSelectorDriver] = driver
	}
	list := metav1.ListOptions{FieldSelector: sel.String()}
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Cap: 5 * time.Minute, Steps: 100}
	_ = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		if !wanted() {
			return true, nil
		}
		err := w.cfg.Slices.DeleteCollection(ctx, metav1.DeleteOptions{}, list)
		if err != nil && !apierrors.IsNotFound(err) {
			klog.V(3).InfoS("Deleting the node's ResourceSlices failed; will retry", "selector", list.FieldSelector, "err", err)
			return false, nil
		}
		klog.InfoS("Deleted the node's ResourceSlices", "selector", list.FieldSelector)
		return true, nil
	})
	if driver != "" {
		w.mu.Lock()
		if at, ok := w.due[driver]; ok && at.IsZero() {
			delete(w.due, driver)
		}
		w.mu.Unlock()
	}
}
