package kubelet

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/eviction"
)

// runEviction evicts pods over their emptyDir sizeLimit, when the config
// enables local storage capacity isolation (the default).
func (k *Kubelet) runEviction(ctx context.Context) {
	if !ptrOr(k.cfg.Kubelet.LocalStorageCapacityIsolation, true) {
		return
	}
	eviction.New(eviction.Config{
		PodDir: k.volumes.PodDir,
		Pods:   k.evictablePods,
		Evict:  k.evict,
	}).Run(ctx)
}

// evictablePods are the active pods but static ones, which upstream
// treats as critical and never evicts.
func (k *Kubelet) evictablePods() []*v1.Pod {
	var out []*v1.Pod
	for _, p := range k.activePods() {
		if !IsStaticPod(p) && k.evictedMessage(p.UID) == "" {
			out = append(out, p)
		}
	}
	return out
}

// evict stops the pod now and fails it with reason Evicted.
func (k *Kubelet) evict(p *v1.Pod, message string) {
	k.mu.Lock()
	k.evicted[p.UID] = message
	k.mu.Unlock()
	k.recorder.Eventf(p, v1.EventTypeWarning, eviction.Reason, "%s", message)
	grace := int64(0)
	k.workers.Terminate(p, &grace)
}

func (k *Kubelet) evictedMessage(uid types.UID) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.evicted[uid]
}

// applyEviction makes an evicted pod's status Failed/Evicted, with the
// DisruptionTarget condition upstream adds.
func (k *Kubelet) applyEviction(uid types.UID, s *v1.PodStatus) {
	msg := k.evictedMessage(uid)
	if msg == "" {
		return
	}
	// Failed even when the containers exited 0 on SIGTERM, as upstream.
	s.Phase, s.Reason, s.Message = v1.PodFailed, eviction.Reason, msg
	for _, c := range s.Conditions {
		if c.Type == v1.DisruptionTarget {
			return
		}
	}
	s.Conditions = append(s.Conditions, v1.PodCondition{
		Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonTerminationByKubelet,
		Message: msg,
	})
	klog.V(4).InfoS("Pod status marked evicted", "podUID", uid)
}
