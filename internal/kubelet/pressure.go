package kubelet

import (
	"context"
	"path"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/eviction"
	"github.com/skiff-sh/skiff/internal/imagegc"
	"github.com/skiff-sh/skiff/internal/podworker"
)

// evictionManagers are the node-level managers of disk and memory:
// image garbage collection, node-pressure eviction (which also enforces
// containers' and pods' ephemeral-storage limits) and, with local storage
// capacity isolation (the default), the emptyDir sizeLimit checks.
type evictionManagers struct {
	imageGC   *imagegc.Manager
	pressure  *eviction.Pressure
	emptyDirs *eviction.Manager // nil without local storage capacity isolation
}

// newEvictionManagers builds the managers from the config; Run runs them.
func (k *Kubelet) newEvictionManagers() evictionManagers {
	kc := k.cfg.Kubelet
	localStorage := ptr.Deref(kc.LocalStorageCapacityIsolation, true)
	var m evictionManagers
	m.imageGC = imagegc.New(imagegc.Config{
		Runtime: k.cri.Runtime, Images: k.cri.Images,
		HighThresholdPercent: int(ptr.Deref(kc.ImageGCHighThresholdPercent, 85)),
		LowThresholdPercent:  int(ptr.Deref(kc.ImageGCLowThresholdPercent, 80)),
		MinAge:               kc.ImageMinimumGCAge.Duration, MaxAge: kc.ImageMaximumGCAge.Duration,
		SandboxImage: k.cfg.PodInfraContainerImage, Recorder: k.recorder, NodeRef: k.nodeRef(),
		Clock: k.clock,
	})
	m.pressure = k.newPressure(localStorage, m.imageGC)
	if localStorage {
		m.emptyDirs = eviction.New(eviction.Config{
			PodDir: k.volumes.PodDir,
			Pods:   k.evictablePods,
			Evict:  func(p *v1.Pod, message string) { k.evict(p, 0, message) },
			Clock:  k.clock,
		})
	}
	return m
}

// runEviction runs the managers until ctx ends.
func (k *Kubelet) runEviction(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	run := func(f func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); f(ctx) }()
	}
	run(k.eviction.imageGC.Run)
	run(k.eviction.pressure.Run)
	if k.eviction.emptyDirs != nil {
		run(k.eviction.emptyDirs.Run)
	}
}

// newPressure builds the node-pressure eviction manager. Its thresholds
// depend on whether the image filesystem is dedicated, which it asks the
// runtime as it starts.
func (k *Kubelet) newPressure(localStorage bool, gc *imagegc.Manager) *eviction.Pressure {
	kc := k.cfg.Kubelet
	if kc.KernelMemcgNotification {
		klog.InfoS("kernelMemcgNotification is not implemented by Skiff; memory signals are polled every 10s")
	}
	return eviction.NewPressure(eviction.PressureConfig{
		Configure:         k.evictionThresholds,
		TransitionPeriod:  kc.EvictionPressureTransitionPeriod.Duration,
		MaxPodGracePeriod: int64(kc.EvictionMaxPodGracePeriod),
		LocalStorage:      localStorage,
		Summary: func(ctx context.Context, sample bool) (*statsapi.Summary, error) {
			if sample {
				return k.stats.FreshSummary(ctx, 0)
			}
			return k.stats.FreshSummary(ctx, freshStats)
		},
		Pods:      k.evictablePods,
		Evict:     k.evict,
		CleanedUp: k.podCleanedUp,
		ReclaimContainers: func(ctx context.Context) error {
			return imagegc.RemoveDeadContainers(ctx, k.cri.Runtime, k.isActive, k.unlinkRemovedLog)
		},
		ReclaimImages: gc.DeleteUnusedImages,
		Recorder:      k.recorder,
		NodeRef:       k.nodeRef(),
		Clock:         k.clock,
		Metrics:       k.cfg.Metrics,
	})
}

// evictionThresholds parses the configured thresholds for the image
// filesystem the runtime reports: dedicated or shared with the root
// directory. Validation rules out thresholds that cannot be parsed.
func (k *Kubelet) evictionThresholds(ctx context.Context) ([]eviction.Threshold, bool, error) {
	dedicated := false
	if fs, err := k.cri.Images.ImageFsInfo(ctx); err == nil && len(fs.GetImageFilesystems()) > 0 {
		mount := fs.GetImageFilesystems()[0].GetFsId().GetMountpoint()
		if dedicated, err = eviction.DedicatedImageFs(k.cfg.RootDir, mount); err != nil {
			klog.ErrorS(err, "Cannot tell whether the image filesystem is dedicated; taking it as shared")
		}
	}
	thresholds, warnings, err := eviction.ParseThresholds(k.cfg.Kubelet, dedicated)
	if err != nil {
		return nil, false, err
	}
	for _, w := range warnings {
		klog.InfoS("Eviction threshold ignored", "reason", w)
	}
	klog.InfoS("Eviction thresholds", "thresholds", thresholds, "dedicatedImageFs", dedicated)
	return thresholds, dedicated, nil
}

func (k *Kubelet) nodeRef() *v1.ObjectReference {
	return &v1.ObjectReference{Kind: "Node", Name: k.cfg.NodeName, UID: types.UID(k.cfg.NodeName)}
}

// freshStats is how old the stats the eviction manager acts on may be:
// the stats provider's own period (10 s) and a little, so that it does not
// sample the runtime a second time.
const freshStats = 12 * time.Second

// pressureConditions are the node's pressure conditions: none until the
// eviction manager has looked.
func (k *Kubelet) pressureConditions() []v1.NodeConditionType {
	return k.eviction.pressure.Conditions()
}

// isActive says whether the pod runs on (not finished, evicted or
// deleted): its newest dead containers are kept, a finished pod's go.
func (k *Kubelet) isActive(uid types.UID) bool {
	for _, p := range k.activePods() {
		if p.UID == uid {
			return k.records.get(uid).failure == nil
		}
	}
	return false
}

// podCleanedUp says whether an evicted pod's worker has finished it.
func (k *Kubelet) podCleanedUp(p *v1.Pod) bool {
	phase, ok := k.workers.Phase(p.UID)
	return !ok || phase == podworker.Terminated
}

// podsCgroup is the cgroup of all pods under the cgroupfs driver, where
// allocatableMemory.available is read; "" when there is none to read.
func podsCgroup(kc *kubeletconfigv1beta1.KubeletConfiguration) string {
	if !ptr.Deref(kc.CgroupsPerQOS, true) || kc.CgroupDriver == "systemd" {
		return ""
	}
	return path.Join("/", kc.CgroupRoot, "kubepods")
}
