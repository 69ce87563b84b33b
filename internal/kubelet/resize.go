package kubelet

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/featuregate"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/config"
	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/podruntime"
	"github.com/skiff-sh/skiff/internal/podstatus"
	"github.com/skiff-sh/skiff/internal/resize"
)

// resizeRetryPeriod is how often deferred resizes are tried again even if
// nothing freed resources, as upstream.
const resizeRetryPeriod = 3 * time.Minute

// inPlaceResize is in-place pod resize as the kubelet wires it.
type inPlaceResize struct {
	*resize.Manager
	store *resize.Store
	// enabled is the InPlacePodVerticalScaling gate (on in 1.34);
	// reportAllocated the InPlacePodVerticalScalingAllocatedStatus one
	// (deprecated, off).
	enabled, reportAllocated bool
	lastRetry                time.Time
}

// newResize opens the allocation checkpoints in the root directory and
// makes the resize manager.
func (k *Kubelet) newResize() (*inPlaceResize, error) {
	gates, err := config.FeatureGate(k.cfg.Kubelet.FeatureGates)
	if err != nil {
		return nil, err
	}
	store, err := resize.Open(k.cfg.RootDir)
	if err != nil {
		return nil, err
	}
	r := &inPlaceResize{store: store, lastRetry: k.clock.Now(),
		enabled:         gates.Enabled(featuregate.Feature("InPlacePodVerticalScaling")),
		reportAllocated: gates.Enabled(featuregate.Feature("InPlacePodVerticalScalingAllocatedStatus")),
	}
	r.Manager = resize.NewManager(resize.Config{
		Store: store, Clock: k.clock, Recorder: k.recorder,
		Pod:         k.pods.get,
		Active:      k.activePods,
		Allocatable: k.allocatable,
		Static:      IsStaticPod,
		Sync:        func(uid types.UID) { k.workers.Notify(uid) },
	})
	return r, nil
}

// wireResize lets the runtime manager apply allocations in place.
func (k *Kubelet) wireResize(rc *podruntime.Config) {
	if !k.resize.enabled {
		return
	}
	rc.Actuation = k.resize.store
	if pr, ok := k.cgroups.(podruntime.PodResizer); ok {
		rc.PodResizer = pr
	}
}

// allocatedPod is the pod as Skiff runs it: with its allocated resources.
func (k *Kubelet) allocatedPod(pod *v1.Pod) *v1.Pod {
	if !k.resize.enabled {
		return pod
	}
	p, _ := k.resize.Allocated(pod)
	return p
}

// afterResize records how applying the allocation went in the pod's
// resize conditions.
func (k *Kubelet) afterResize(pod *v1.Pod, st *container.PodStatus, res podruntime.SyncResult) {
	if !k.resize.enabled {
		return
	}
	if res.ResizeErr != nil {
		klog.ErrorS(res.ResizeErr, "Pod resize failed; will retry", "pod", klog.KObj(pod))
		k.resize.Failed(pod, res.ResizeErr.Error())
		return
	}
	k.resize.Track(pod, func(name string) bool {
		cs := st.FindContainer(name)
		return cs != nil && cs.State == container.StateRunning
	})
}

// statusResize is what the pod's status shows of resize.
func (k *Kubelet) statusResize(pod *v1.Pod) *podstatus.Resize {
	if !k.resize.enabled {
		return nil
	}
	alloc, ok := k.resize.store.Allocated(pod.UID)
	if !ok {
		alloc = resize.AllocationOf(pod)
	}
	return &podstatus.Resize{
		Allocated: func(name string) (v1.ResourceRequirements, bool) {
			r, ok := alloc[name]
			return r, ok
		},
		ReportAllocated: k.resize.reportAllocated,
		Conditions:      k.resize.Conditions(pod.UID),
	}
}

// resizeHousekeeping retries deferred resizes every few minutes and
// drops the checkpoints of pods that are gone.
func (k *Kubelet) resizeHousekeeping() {
	if !k.resize.enabled {
		return
	}
	if k.clock.Since(k.resize.lastRetry) >= resizeRetryPeriod {
		k.resize.lastRetry = k.clock.Now()
		k.resize.Retry()
	}
	err := k.resize.store.Retain(func(uid types.UID) bool {
		_, wanted := k.pods.get(uid)
		return wanted || k.workers.Has(uid)
	})
	if err != nil {
		klog.ErrorS(err, "Cannot drop resize checkpoints of pods that are gone")
	}
}
