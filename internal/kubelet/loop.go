package kubelet

import (
	"context"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/podsource"
	"github.com/skiff-sh/skiff/internal/podsource/file"
	podurl "github.com/skiff-sh/skiff/internal/podsource/url"
	"github.com/skiff-sh/skiff/internal/prober"
)

// syncLoop is the kubelet's one select: source updates, runtime events and
// housekeeping, until ctx ends.
func (k *Kubelet) syncLoop(ctx context.Context, updates <-chan podsource.Update) {
	housekeeping := k.clock.NewTicker(k.periods.Housekeeping)
	defer housekeeping.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case u := <-updates:
			k.handleUpdate(ctx, u)
		case e := <-k.pleg.Events():
			klog.V(4).InfoS("PLEG event", "podUID", e.ID, "type", e.Type, "id", e.Data)
			k.workers.Notify(e.ID)
		case u := <-k.prober.Updates():
			// A changed probe result changes the pod's status, or (a failed
			// liveness or startup probe) asks for a kill: sync it now. A
			// readiness result goes into the recorded status at once and
			// needs no sync, unless that status lags behind its container.
			klog.V(4).InfoS("Probe result changed", "podUID", u.PodUID, "probe", u.Kind, "containerID", u.ContainerID, "result", u.Result)
			if u.Kind == prober.Readiness && k.setReadiness(u) {
				continue
			}
			k.workers.Notify(u.PodUID)
		case <-housekeeping.C():
			k.housekeeping(ctx)
		}
	}
}

// runSources starts the static pod file and manifest URL sources, if
// configured.
func (k *Kubelet) runSources(spawn func(func(context.Context)), updates chan<- podsource.Update) {
	kc := k.cfg.Kubelet
	if kc.StaticPodPath != "" {
		src := file.New(file.Config{Path: kc.StaticPodPath, NodeName: k.cfg.NodeName, Period: kc.FileCheckFrequency.Duration})
		spawn(func(ctx context.Context) { src.Run(ctx, updates) })
	}
	if kc.StaticPodURL != "" {
		src := podurl.New(podurl.Config{URL: kc.StaticPodURL, Header: kc.StaticPodURLHeader,
			NodeName: k.cfg.NodeName, Period: kc.HTTPCheckFrequency.Duration})
		spawn(func(ctx context.Context) { src.Run(ctx, updates) })
	}
}

func (k *Kubelet) handleUpdate(ctx context.Context, u podsource.Update) {
	ch := k.pods.apply(u)
	for _, p := range ch.removed {
		klog.V(2).InfoS("Pod removed from its source", "pod", klog.KObj(p), "source", u.Source)
		k.removePod(ctx, p)
	}
	// Admit in creation order, as upstream, so earlier pods win resources.
	sort.SliceStable(ch.updated, func(i, j int) bool {
		return ch.updated[i].CreationTimestamp.Before(&ch.updated[j].CreationTimestamp)
	})
	for _, p := range ch.updated {
		k.handlePod(ctx, p)
	}
	if k.resize.enabled && len(ch.updated) > 0 {
		// Once the whole batch is admitted: after a restart, a resize
		// still pending is judged against every pod, not the first few.
		k.resize.Retry()
	}
	for _, name := range ch.mirrors {
		if p, ok := k.pods.byFullName(name); ok && IsStaticPod(p) {
			k.workers.Notify(p.UID)  // its mirror pod changed or went: re-sync it
			k.statuses.PodUpdated(p) // a new mirror pod needs the status now
		}
	}
}

// handlePod acts on a new or changed pod.
func (k *Kubelet) handlePod(ctx context.Context, p *v1.Pod) {
	k.statuses.PodUpdated(p)
	if k.records.get(p.UID).verdict == rejected {
		return
	}
	known := k.workers.Has(p.UID)
	if !known && p.DeletionTimestamp == nil {
		k.startup.Seen(p.UID)
		began := k.clock.Now()
		ok := k.admit(ctx, p)
		k.startup.Admitted(p.UID, k.clock.Since(began))
		if !ok {
			return
		}
	}
	switch {
	case p.DeletionTimestamp != nil || !k.resize.enabled:
	case known:
		// A changed spec is decided before the worker syncs it, as
		// upstream: the worker never reports the new generation
		// without the resize's outcome.
		k.resize.Resized(p.UID)
	default:
		// After a restart, a resize still pending in the checkpoint is
		// decided once the whole batch is admitted (handleUpdate).
		k.resize.Push(p.UID)
	}
	k.workers.Update(p)
	if p.DeletionTimestamp != nil {
		k.workers.Terminate(p, p.DeletionGracePeriodSeconds)
	}
}

// removePod acts on a pod no source wants any more: its worker stops it
// and then tears it down; a pod without a worker (refused, or waiting for
// the Node) has nothing running and is torn down at once.
func (k *Kubelet) removePod(ctx context.Context, p *v1.Pod) {
	if k.workers.Has(p.UID) {
		k.workers.Remove(refOf(p), nil)
		return
	}
	if err := k.teardownPod(ctx, refOf(p)); err != nil {
		klog.ErrorS(err, "Failed to clean up pod", "pod", klog.KObj(p))
	}
}

// housekeeping admits pods that waited for the Node, stops pods the runtime
// runs that no source wants, and deletes mirror pods of static pods that
// are gone — the last two only once every source has spoken, so a
// restarted Skiff never kills what it is about to adopt.
func (k *Kubelet) housekeeping(ctx context.Context) {
	for _, p := range k.pendingPods() {
		k.handlePod(ctx, p)
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
	k.resizeHousekeeping()
	k.cluster.deleteMirrorPods(ctx, k.pods.orphanedMirrors())
	k.runtime.GC()
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
		if err := k.volumeManager.TearDownPod(ctx, uid); err != nil {
			klog.ErrorS(err, "Failed to clean up orphaned pod directory", "podUID", uid)
			continue
		}
		klog.InfoS("Cleaned up orphaned pod directory", "podUID", uid)
	}
}
