package eviction

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/metrics"
	"github.com/skiff-sh/skiff/internal/podsource"
)

// Upstream's messages.
const (
	nodeLowMessageFmt       = "The node was low on resource: %v. "
	thresholdMetMessageFmt  = "Threshold quantity: %v, available: %v. "
	containerMessageFmt     = "Container %s was using %s, request is %s, has larger consumption of %v. "
	nodeConditionMessageFmt = "The node had condition: %v. "
)

const (
	// A pod evicted for a hard threshold gets this grace period, as upstream.
	immediateGracePeriod = 1
	// After an eviction the manager waits this long at most for the pod
	// to be cleaned up before it looks again.
	podCleanupTimeout = 30 * time.Second
	podCleanupPoll    = time.Second
	// After node-level reclaim the disk is looked at again for this long
	// (measured: containerd 1.6 frees a removed writable layer within a
	// second of RemoveContainer returning).
	reclaimSettle     = 3 * time.Second
	reclaimSettlePoll = 500 * time.Millisecond
	// systemCriticalPriority is scheduling.SystemCriticalPriority.
	systemCriticalPriority = 2 * 1000000000
)

// Recorder records events; client-go's record.EventRecorder fits.
type Recorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

// PressureConfig configures a Pressure manager.
type PressureConfig struct {
	Thresholds []Threshold
	// TransitionPeriod is evictionPressureTransitionPeriod: a condition
	// stays True this long after its last observation.
	TransitionPeriod time.Duration
	// MaxPodGracePeriod is evictionMaxPodGracePeriod: the cap on a pod's
	// grace period when a soft threshold evicts it (0: the pod's own).
	MaxPodGracePeriod int64
	Period            time.Duration // between two looks; 10 s by default
	// DedicatedImageFs: the runtime's images are on another filesystem
	// than the root directory.
	DedicatedImageFs bool
	// LocalStorage is localStorageCapacityIsolation: enforce containers'
	// and pods' ephemeral-storage limits.
	LocalStorage bool

	// Summary returns recent statistics; with sample, statistics sampled
	// now (what node-level reclaim freed shows only in those).
	Summary func(ctx context.Context, sample bool) (*statsapi.Summary, error)
	// Pods are the active pods.
	Pods func() []*v1.Pod
	// Evict terminates the pod with the grace period and fails it with
	// reason Evicted and message; false if it could not.
	Evict func(pod *v1.Pod, grace int64, message string) bool
	// CleanedUp reports whether an evicted pod's containers are gone.
	CleanedUp func(pod *v1.Pod) bool
	// ReclaimContainers removes dead containers and sandboxes;
	// ReclaimImages removes unused images. Either may be nil.
	ReclaimContainers, ReclaimImages func(ctx context.Context) error
	Recorder                         Recorder
	NodeRef                          *v1.ObjectReference
	Clock                            clock.Clock
	// Configure, when set, is asked once as Run begins for the thresholds
	// and DedicatedImageFs, which replace the ones above: they depend on
	// where the runtime keeps its images, which only the runtime can say.
	// An error leaves node-pressure eviction off.
	Configure func(ctx context.Context) (thresholds []Threshold, dedicatedImageFs bool, err error)
	// Metrics counts evictions by signal; nil: a registry of its own.
	Metrics *metrics.Registry
}

// Pressure is the node-pressure eviction manager: it observes the signals,
// reports the node conditions, reclaims node-level resources and evicts
// pods one at a time, as upstream's eviction manager.
type Pressure struct {
	cfg   PressureConfig
	ranks map[Signal]rankFunc

	mu              sync.RWMutex
	conditions      []v1.NodeConditionType
	conditionSeen   map[v1.NodeConditionType]time.Time // last observed
	firstMet        map[string]time.Time               // threshold key → first observed
	thresholdsMet   []Threshold                        // met, grace periods over, not yet reclaimed
	lastObservation observations
}

// NewPressure returns a manager; Run starts it.
func NewPressure(cfg PressureConfig) *Pressure {
	if cfg.Period <= 0 {
		cfg.Period = 10 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New()
	}
	p := &Pressure{cfg: cfg, conditionSeen: map[v1.NodeConditionType]time.Time{}, firstMet: map[string]time.Time{}}
	p.setRanks()
	return p
}

func (p *Pressure) setRanks() {
	p.ranks = map[Signal]rankFunc{}
	for s := range signalResource {
		p.ranks[s] = rankFor(s, p.cfg.DedicatedImageFs)
	}
}

// Conditions are the node's pressure conditions now.
func (p *Pressure) Conditions() []v1.NodeConditionType {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return append([]v1.NodeConditionType(nil), p.conditions...)
}

// Run looks every Period until ctx ends; after an eviction it waits for
// the pod to be cleaned up and looks again at once.
func (p *Pressure) Run(ctx context.Context) {
	if p.cfg.Configure != nil {
		thresholds, dedicated, err := p.cfg.Configure(ctx)
		if err != nil {
			klog.ErrorS(err, "Eviction thresholds not usable; node-pressure eviction is off")
			return
		}
		p.mu.Lock()
		p.cfg.Thresholds, p.cfg.DedicatedImageFs = thresholds, dedicated
		p.setRanks()
		p.mu.Unlock()
	}
	if len(p.cfg.Thresholds) == 0 && !p.cfg.LocalStorage {
		return
	}
	klog.InfoS("Eviction manager started", "thresholds", len(p.cfg.Thresholds), "period", p.cfg.Period)
	for {
		if evicted := p.Synchronize(ctx); len(evicted) > 0 {
			p.waitCleanup(ctx, evicted)
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-p.cfg.Clock.After(p.cfg.Period):
		}
	}
}

// Synchronize looks once: it updates the conditions and evicts at most
// one pod for node pressure (or every pod over its storage limits).
func (p *Pressure) Synchronize(ctx context.Context) []*v1.Pod {
	summary, err := p.cfg.Summary(ctx, false)
	if err != nil {
		klog.ErrorS(err, "Eviction manager: failed to get summary stats")
		return nil
	}
	pods := p.cfg.Pods()
	obs, stats := observe(summary)
	thresholds := p.update(obs)

	if p.cfg.LocalStorage {
		if evicted := p.localStorage(pods, stats); len(evicted) > 0 {
			return evicted
		}
	}
	if len(thresholds) == 0 {
		return nil
	}
	// Memory first, as upstream; thresholds without a resource last.
	sort.SliceStable(thresholds, func(i, j int) bool {
		return signalResource[thresholds[i].Signal] == v1.ResourceMemory && signalResource[thresholds[j].Signal] != v1.ResourceMemory
	})
	t := thresholds[0]
	res := signalResource[t.Signal]
	klog.InfoS("Eviction manager: attempting to reclaim", "resourceName", res)
	if p.cfg.Recorder != nil && p.cfg.NodeRef != nil {
		p.cfg.Recorder.Eventf(p.cfg.NodeRef, v1.EventTypeWarning, "EvictionThresholdMet", "Attempting to reclaim %s", res)
	}
	if p.reclaimNodeLevel(ctx, t.Signal) {
		klog.InfoS("Eviction manager: able to reduce resource pressure without evicting pods.", "resourceName", res)
		return nil
	}
	var candidates []*v1.Pod
	for _, pod := range pods {
		if !IsCritical(pod) {
			candidates = append(candidates, pod)
		}
	}
	if len(candidates) == 0 {
		klog.ErrorS(nil, "Eviction manager: eviction thresholds have been met, but no pods are active to evict")
		return nil
	}
	p.ranks[t.Signal](candidates, stats)
	klog.InfoS("Eviction manager: pods ranked for eviction", "pods", klog.KObjSlice(candidates))
	for _, pod := range candidates {
		grace := int64(immediateGracePeriod)
		if !t.hard() {
			grace = softGrace(pod, p.cfg.MaxPodGracePeriod)
		}
		msg := message(res, pod, stats, thresholds, obs)
		if p.cfg.Evict(pod, grace, msg) {
			p.cfg.Metrics.Evictions.WithLabelValues(string(t.Signal)).Inc()
			return []*v1.Pod{pod}
		}
	}
	klog.InfoS("Eviction manager: unable to evict any pods from the node")
	return nil
}

// update records what the observations show and returns the thresholds
// to act on now: met (or not yet reclaimed), past their grace periods,
// with fresher stats than last time.
func (p *Pressure) update(obs observations) []Threshold {
	now := p.cfg.Clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	thresholds := met(p.cfg.Thresholds, obs, false)
	if len(p.thresholdsMet) > 0 {
		thresholds = merge(thresholds, met(p.thresholdsMet, obs, true))
	}
	first := map[string]time.Time{}
	for _, t := range thresholds {
		at, ok := p.firstMet[t.key()]
		if !ok {
			at = now
		}
		first[t.key()] = at
	}
	for _, c := range conditionsOf(thresholds) {
		p.conditionSeen[c] = now
	}
	var conds []v1.NodeConditionType
	for c, at := range p.conditionSeen {
		if now.Sub(at) < p.cfg.TransitionPeriod || at.Equal(now) {
			conds = append(conds, c)
		}
	}
	sort.Slice(conds, func(i, j int) bool { return conds[i] < conds[j] })
	var due []Threshold
	for _, t := range thresholds {
		if d := now.Sub(first[t.key()]); d < t.GracePeriod {
			klog.V(2).InfoS("Eviction manager: eviction criteria not yet met", "signal", t.Signal, "gracePeriod", t.GracePeriod, "duration", d)
			continue
		}
		due = append(due, t)
	}
	p.conditions, p.firstMet, p.thresholdsMet = conds, first, due
	var fresh []Threshold
	for _, t := range due {
		o := obs[t.Signal]
		last, ok := p.lastObservation[t.Signal]
		if !ok || o.time.IsZero() || o.time.After(last.time) {
			fresh = append(fresh, t)
		}
	}
	p.lastObservation = obs
	return fresh
}

// reclaimNodeLevel frees disk without evicting (dead containers, then
// unused images) and says whether every threshold, minimum reclaim
// included, is then satisfied.
func (p *Pressure) reclaimNodeLevel(ctx context.Context, s Signal) bool {
	var funcs []func(context.Context) error
	switch signalResource[s] {
	case v1.ResourceEphemeralStorage, resourceInodes:
		nodefs := s == SignalNodeFsAvailable || s == SignalNodeFsInodesFree
		if p.cfg.DedicatedImageFs && nodefs {
			return false // logs and volumes only; nothing to reclaim
		}
		funcs = []func(context.Context) error{p.cfg.ReclaimContainers, p.cfg.ReclaimImages}
	default:
		return false
	}
	ran := false
	for _, f := range funcs {
		if f == nil {
			continue
		}
		ran = true
		if err := f(ctx); err != nil {
			klog.InfoS("Eviction manager: unexpected error when attempting to reduce resource pressure", "resourceName", signalResource[s], "err", err)
		}
	}
	if !ran {
		return false
	}
	// containerd frees a removed container's writable layer and an
	// image's layers in its garbage collection, moments after the calls
	// return: judged at once, a reclaim that sufficed looks short and a
	// pod is evicted for nothing. Look again for a little while.
	deadline := p.cfg.Clock.Now().Add(reclaimSettle)
	for {
		summary, err := p.cfg.Summary(ctx, true)
		if err != nil {
			klog.ErrorS(err, "Eviction manager: failed to get summary stats after resource reclaim")
			return false
		}
		obs, _ := observe(summary)
		if len(met(p.cfg.Thresholds, obs, true)) == 0 {
			return true
		}
		if ctx.Err() != nil || !p.cfg.Clock.Now().Before(deadline) {
			return false
		}
		p.cfg.Clock.Sleep(reclaimSettlePoll)
	}
}

func (p *Pressure) waitCleanup(ctx context.Context, pods []*v1.Pod) {
	deadline := p.cfg.Clock.Now().Add(podCleanupTimeout)
	for p.cfg.Clock.Now().Before(deadline) {
		done := true
		for _, pod := range pods {
			done = done && p.cfg.CleanedUp(pod)
		}
		if done {
			klog.InfoS("Eviction manager: pods successfully cleaned up", "pods", klog.KObjSlice(pods))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-p.cfg.Clock.After(podCleanupPoll):
		}
	}
	klog.InfoS("Eviction manager: timed out waiting for pods to be cleaned up", "pods", klog.KObjSlice(pods))
}

// softGrace is the grace period of a soft eviction: the pod's own, capped
// at evictionMaxPodGracePeriod when that is set.
func softGrace(pod *v1.Pod, maxGrace int64) int64 {
	grace := int64(v1.DefaultTerminationGracePeriodSeconds)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	if maxGrace > 0 && grace > maxGrace {
		grace = maxGrace
	}
	return grace
}

// IsCritical says whether a pod is never evicted and admitted under
// pressure, as upstream: static and mirror pods, and pods of system
// critical priority.
func IsCritical(pod *v1.Pod) bool {
	if s := pod.Annotations[podsource.ConfigSourceAnnotation]; s != "" && s != podsource.APIServer {
		return true
	}
	if _, ok := pod.Annotations[podsource.ConfigMirrorAnnotation]; ok {
		return true
	}
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= systemCriticalPriority
}

// NodeConditionMessage is the message of a pod refused under pressure.
func NodeConditionMessage(conds []v1.NodeConditionType) string {
	return fmt.Sprintf(nodeConditionMessageFmt, conds)
}
