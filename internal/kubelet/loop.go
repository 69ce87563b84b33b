package kubelet

import (
	"context"
	"time"

	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/cri"
	"github.com/skiff-sh/skiff/internal/podsource"
)

// syncLoop is the kubelet's one select: source updates, runtime events and
// housekeeping, until ctx ends.
func (k *Kubelet) syncLoop(ctx context.Context, updates <-chan podsource.Update) {
	housekeeping := time.NewTicker(housekeepingPeriod)
	defer housekeeping.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case u := <-updates:
			updated, removed := k.pods.apply(u)
			for _, p := range removed {
				klog.InfoS("Pod removed from its source", "pod", klog.KObj(p), "source", u.Source)
				k.workers.Remove(cri.PodRef{UID: p.UID, Name: p.Name, Namespace: p.Namespace}, nil)
			}
			for _, p := range updated {
				k.workers.Update(p)
			}
		case e := <-k.pleg.Events():
			klog.V(4).InfoS("PLEG event", "podUID", e.ID, "type", e.Type, "id", e.Data)
			k.workers.Notify(e.ID)
		case <-housekeeping.C:
			k.housekeeping()
		}
	}
}

// housekeeping stops pods the runtime runs that no source wants (once every
// source has spoken, so a restarted Skiff never kills what it will adopt).
func (k *Kubelet) housekeeping() {
	if !k.pods.ready(k.sources) {
		return
	}
	for _, ref := range k.pleg.Pods() {
		if _, wanted := k.pods.get(ref.UID); wanted || k.workers.Has(ref.UID) {
			continue
		}
		klog.InfoS("Stopping orphaned pod", "pod", klog.KRef(ref.Namespace, ref.Name), "podUID", ref.UID)
		k.workers.Remove(ref, nil)
	}
	k.runtime.GC()
}
