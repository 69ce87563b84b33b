package kubelet

import (
	"context"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/cri"
	"github.com/skiff-sh/skiff/internal/metrics"
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
			k.handleUpdate(u)
		case e := <-k.pleg.Events():
			klog.V(4).InfoS("PLEG event", "podUID", e.ID, "type", e.Type, "id", e.Data)
			k.workers.Notify(e.ID)
		case u := <-k.prober.Updates():
			// A changed probe result changes the pod's status, or (a failed
			// liveness or startup probe) asks for a kill: sync it now.
			klog.V(4).InfoS("Probe result changed", "podUID", u.PodUID, "probe", u.Kind, "containerID", u.ContainerID, "result", u.Result)
			k.workers.Notify(u.PodUID)
		case <-housekeeping.C:
			k.housekeeping(ctx)
		}
	}
}

func (k *Kubelet) handleUpdate(u podsource.Update) {
	ch := k.pods.apply(u)
	for _, p := range ch.removed {
		klog.V(2).InfoS("Pod removed from its source", "pod", klog.KObj(p), "source", u.Source)
		k.workers.Remove(refOf(p), nil)
		k.forget(p)
	}
	// Admit in creation order, as upstream, so earlier pods win resources.
	sort.SliceStable(ch.updated, func(i, j int) bool {
		return ch.updated[i].CreationTimestamp.Before(&ch.updated[j].CreationTimestamp)
	})
	for _, p := range ch.updated {
		k.handlePod(p)
	}
	for _, name := range ch.mirrors {
		if p, ok := k.pods.byFullName(name); ok && IsStaticPod(p) {
			k.workers.Notify(p.UID) // its mirror pod changed or went: re-sync it
			if k.statusMgr != nil {
				k.statusMgr.PodUpdated(p) // a new mirror pod needs the status now
			}
		}
	}
}

// handlePod acts on a new or changed pod.
func (k *Kubelet) handlePod(p *v1.Pod) {
	if k.statusMgr != nil {
		k.statusMgr.PodUpdated(p)
	}
	if k.isRejected(p) {
		return
	}
	known := k.workers.Has(p.UID)
	if !known && p.DeletionTimestamp == nil {
		k.startup.Seen(p.UID)
		began := time.Now()
		ok := k.admit(p)
		k.startup.Admitted(p.UID, time.Since(began))
		if !ok {
			return
		}
	}
	if !known {
		metrics.PodStarts.Seen(p.UID, time.Now())
	}
	k.workers.Update(p)
	if p.DeletionTimestamp != nil {
		k.workers.Terminate(p, p.DeletionGracePeriodSeconds)
	}
}

// housekeeping admits pods that waited for the Node, stops pods the runtime
// runs that no source wants, and deletes mirror pods of static pods that
// are gone — the last two only once every source has spoken, so a
// restarted Skiff never kills what it is about to adopt.
func (k *Kubelet) housekeeping(ctx context.Context) {
	for _, p := range k.pendingPods() {
		k.handlePod(p)
	}
	if !k.pods.ready(k.sources) {
		return
	}
	listed := k.pleg.LastRelist() // before Pods: never newer than the list
	for _, ref := range k.pleg.Pods() {
		if _, wanted := k.pods.get(ref.UID); wanted || k.workers.Has(ref.UID) || k.runtime.RemovingSandboxes(ref.UID, listed) {
			continue
		}
		klog.InfoS("Stopping orphaned pod", "pod", klog.KRef(ref.Namespace, ref.Name), "podUID", ref.UID)
		k.workers.Remove(ref, nil)
	}
	k.cleanupOrphanedPodDirs(ctx)
	k.cleanupOrphanedCgroups(ctx)
	if k.client != nil {
		for _, mp := range k.pods.orphanedMirrors() {
			if err := k.deleteMirrorPod(ctx, mp); err != nil {
				klog.ErrorS(err, "Failed to delete orphaned mirror pod", "pod", klog.KObj(mp))
			}
		}
	}
	k.runtime.GC()
}

func (k *Kubelet) forget(p *v1.Pod) {
	if k.statusMgr != nil {
		k.statusMgr.RemovePod(p.UID)
	}
	k.startup.Forget(p.UID)
	k.prober.RemovePod(p.UID)
	k.mu.Lock()
	if k.rejected[p.UID] {
		k.statuses.Delete(p.UID) // no worker will
	}
	delete(k.rejected, p.UID)
	delete(k.pending, p.UID)
	k.mu.Unlock()
	metrics.PodStarts.Forget(p.UID)
	metrics.ForgetPodProbes(p.Namespace, p.Name, p.UID)
}

func refOf(p *v1.Pod) cri.PodRef {
	return cri.PodRef{UID: p.UID, Name: p.Name, Namespace: p.Namespace}
}

// cleanupOrphanedPodDirs removes the volumes of pods that neither a source
// nor a worker knows, e.g. pods deleted while Skiff was down. A pod still
// being stopped keeps its worker, so nothing of it is touched.
func (k *Kubelet) cleanupOrphanedPodDirs(ctx context.Context) {
	uids, err := k.volumes.PodsOnDisk()
	if err != nil {
		klog.ErrorS(err, "Cannot list pod directories")
		return
	}
	for _, uid := range uids {
		if _, wanted := k.pods.get(uid); wanted || k.workers.Has(uid) {
			continue
		}
		if err := k.volumes.TearDown(ctx, uid); err != nil {
			klog.ErrorS(err, "Failed to clean up orphaned pod directory", "podUID", uid)
			continue
		}
		klog.InfoS("Cleaned up orphaned pod directory", "podUID", uid)
	}
}
