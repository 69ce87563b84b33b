// Package imagegc removes unused images, as upstream's image garbage
// collector: when the image filesystem is fuller than the high threshold
// it frees space down to the low threshold, least recently used first;
// images unused for longer than the maximum age go regardless; images no
// older than the minimum age, images any container uses (running or not)
// and the sandbox image are never removed.
package imagegc

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Recorder records events; client-go's record.EventRecorder fits.
type Recorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

// Config configures a Manager.
type Config struct {
	Runtime internalapi.RuntimeService
	Images  internalapi.ImageManagerService
	// HighThresholdPercent and LowThresholdPercent are
	// imageGCHighThresholdPercent and imageGCLowThresholdPercent.
	HighThresholdPercent, LowThresholdPercent int
	// MinAge is imageMinimumGCAge; MaxAge imageMaximumGCAge (0: none).
	MinAge, MaxAge time.Duration
	// SandboxImage is never removed; "" takes the runtime's own.
	SandboxImage string
	Recorder     Recorder
	NodeRef      *v1.ObjectReference
	Clock        clock.Clock
	// Period between two collections; upstream's is 5 minutes.
	Period time.Duration
}

// record is what the manager knows of one image.
type record struct {
	firstDetected, lastUsed time.Time
	size                    uint64
}

// Manager tracks image use and removes unused images.
type Manager struct {
	cfg Config

	// fs returns the image filesystem's capacity and available bytes.
	fs func(ctx context.Context) (capacity, available uint64, err error)

	mu      sync.Mutex // one collection at a time; guards images
	images  map[string]*record
	failing bool   // the last collection failed
	sandbox string // the sandbox image, once known
}

// New returns a Manager; Run starts it.
func New(cfg Config) *Manager {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Period <= 0 {
		cfg.Period = 5 * time.Minute
	}
	m := &Manager{cfg: cfg, images: map[string]*record{}}
	m.fs = m.imageFs
	return m
}

// Run records image use every few seconds and collects every Period,
// until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	if m.cfg.HighThresholdPercent >= 100 && m.cfg.MaxAge == 0 {
		klog.InfoS("Image garbage collection is off (imageGCHighThresholdPercent 100)")
	}
	next := m.cfg.Clock.Now() // the first collection at once, as upstream
	for {
		m.mu.Lock()
		_, err := m.detect(ctx)
		m.mu.Unlock()
		if err != nil && ctx.Err() == nil {
			klog.ErrorS(err, "Image garbage collection: cannot list images in use")
		}
		if now := m.cfg.Clock.Now(); !now.Before(next) {
			next = now.Add(m.cfg.Period)
			m.collectAndReport(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-m.cfg.Clock.After(detectPeriod):
		}
	}
}

// detectPeriod is how often image use is recorded. A container's image
// counts as used as long as the container exists, exited or not, so this
// only bounds how stale lastUsed may be; upstream records it every 5
// minutes.
const detectPeriod = 30 * time.Second

func (m *Manager) collectAndReport(ctx context.Context) {
	err := m.GarbageCollect(ctx)
	if err == nil {
		m.failing = false
		return
	}
	// Once is logged, twice in a row is an event, as upstream.
	if m.failing && m.cfg.Recorder != nil && m.cfg.NodeRef != nil {
		m.cfg.Recorder.Eventf(m.cfg.NodeRef, v1.EventTypeWarning, "ImageGCFailed", "%s", err.Error())
	}
	klog.ErrorS(err, "Image garbage collection failed")
	m.failing = true
}

// detect records the images and which are in use now, and returns those.
// The caller holds mu.
func (m *Manager) detect(ctx context.Context) (map[string]bool, error) {
	now := m.cfg.Clock.Now()
	images, err := m.cfg.Images.ListImages(ctx, &runtimeapi.ImageFilter{})
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	containers, err := m.cfg.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	sandbox := m.sandboxImage(ctx)
	inUse := map[string]bool{}
	for _, c := range containers {
		inUse[c.ImageRef] = true
		inUse[c.GetImage().GetImage()] = true
	}
	seen := map[string]bool{}
	for _, img := range images {
		seen[img.Id] = true
		r, ok := m.images[img.Id]
		if !ok {
			r = &record{firstDetected: now}
			m.images[img.Id] = r
		}
		r.size = img.Size
		if m.used(img, inUse, sandbox) {
			r.lastUsed = now
		}
	}
	for id := range m.images {
		if !seen[id] {
			delete(m.images, id)
		}
	}
	out := map[string]bool{}
	for _, img := range images {
		if m.used(img, inUse, sandbox) {
			out[img.Id] = true
		}
	}
	return out, nil
}

// used says whether a container uses img or it is the sandbox image (or
// pinned by the runtime), which is never removed.
func (m *Manager) used(img *runtimeapi.Image, inUse map[string]bool, sandbox string) bool {
	if img.Pinned || inUse[img.Id] {
		return true
	}
	for _, name := range append(append([]string{}, img.RepoTags...), img.RepoDigests...) {
		if inUse[name] || sandbox != "" && name == sandbox {
			return true
		}
	}
	return false
}

// GarbageCollect removes images past the maximum age, then, when the
// image filesystem is used above the high threshold, frees space down to
// the low threshold. Not freeing enough is an error and a
// FreeDiskSpaceFailed event.
func (m *Manager) GarbageCollect(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	inUse, err := m.detect(ctx)
	if err != nil {
		return err
	}
	if m.cfg.MaxAge > 0 {
		m.removeOld(ctx, inUse)
	}
	if m.cfg.HighThresholdPercent >= 100 {
		return nil
	}
	capacity, available, err := m.fs(ctx)
	if err != nil {
		return err
	}
	usage := 100 - int(available*100/capacity)
	if usage < m.cfg.HighThresholdPercent {
		return nil
	}
	want := int64(capacity)*int64(100-m.cfg.LowThresholdPercent)/100 - int64(available)
	klog.InfoS("Disk usage on image filesystem is over the high threshold, trying to free bytes down to the low threshold",
		"usage", usage, "highThreshold", m.cfg.HighThresholdPercent, "amountToFree", want, "lowThreshold", m.cfg.LowThresholdPercent)
	freed := m.freeSpace(ctx, want, inUse)
	if freed < want {
		msg := fmt.Sprintf("Failed to garbage collect required amount of images. Attempted to free %d bytes, but only found %d bytes eligible to free.", want, freed)
		if m.cfg.Recorder != nil && m.cfg.NodeRef != nil {
			m.cfg.Recorder.Eventf(m.cfg.NodeRef, v1.EventTypeWarning, "FreeDiskSpaceFailed", "%s", msg)
		}
		return fmt.Errorf("%s", msg)
	}
	return nil
}

// DeleteUnusedImages removes every image the rules allow to remove: the
// eviction manager's node-level reclaim.
func (m *Manager) DeleteUnusedImages(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	inUse, err := m.detect(ctx)
	if err != nil {
		return err
	}
	m.freeSpace(ctx, math.MaxInt64, inUse)
	return nil
}

func (m *Manager) imageFs(ctx context.Context) (capacity, available uint64, err error) {
	resp, err := m.cfg.Images.ImageFsInfo(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("image filesystem info: %w", err)
	}
	if len(resp.GetImageFilesystems()) == 0 {
		return 0, 0, fmt.Errorf("the runtime reports no image filesystem")
	}
	var st syscall.Statfs_t
	mount := resp.GetImageFilesystems()[0].GetFsId().GetMountpoint()
	if err := syscall.Statfs(mount, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", mount, err)
	}
	if st.Blocks == 0 {
		return 0, 0, fmt.Errorf("invalid capacity 0 on image filesystem %s", mount)
	}
	return st.Blocks * uint64(st.Bsize), st.Bavail * uint64(st.Bsize), nil
}

// candidates are the removable images, least recently used first (then
// first detected), as upstream orders them.
func (m *Manager) candidates(inUse map[string]bool) []string {
	now := m.cfg.Clock.Now()
	var ids []string
	for id, r := range m.images {
		if inUse[id] || now.Sub(r.firstDetected) < m.cfg.MinAge {
			continue
		}
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		a, b := m.images[ids[i]], m.images[ids[j]]
		if !a.lastUsed.Equal(b.lastUsed) {
			return a.lastUsed.Before(b.lastUsed)
		}
		return a.firstDetected.Before(b.firstDetected)
	})
	return ids
}

// freeSpace removes candidates until want bytes are freed; it returns
// what it freed.
func (m *Manager) freeSpace(ctx context.Context, want int64, inUse map[string]bool) int64 {
	var freed int64
	for _, id := range m.candidates(inUse) {
		if freed >= want {
			break
		}
		if m.remove(ctx, id) {
			freed += int64(m.images[id].size)
			delete(m.images, id)
		}
	}
	return freed
}

// removeOld removes unused images not used for longer than MaxAge.
func (m *Manager) removeOld(ctx context.Context, inUse map[string]bool) {
	now := m.cfg.Clock.Now()
	for _, id := range m.candidates(inUse) {
		r := m.images[id]
		last := r.lastUsed
		if last.IsZero() {
			last = r.firstDetected
		}
		if now.Sub(last) > m.cfg.MaxAge && m.remove(ctx, id) {
			delete(m.images, id)
		}
	}
}

func (m *Manager) remove(ctx context.Context, id string) bool {
	klog.InfoS("Removing image to free bytes", "imageID", id, "size", m.images[id].size)
	err := m.cfg.Images.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: id})
	if err != nil && !isNotFound(err) {
		klog.ErrorS(err, "Failed to remove image", "imageID", id)
		return false
	}
	return true
}
