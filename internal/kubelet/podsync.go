package kubelet

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/podruntime"
	"github.com/skiff-sh/skiff/internal/podstatus"
	"github.com/skiff-sh/skiff/internal/prober"
)

// The kubelet is the pod workers' podworker.Handler: each phase does the
// runtime work, runs the pod's hooks and records the pod's status.

// SyncPod drives a pod towards its spec.
func (k *Kubelet) SyncPod(ctx context.Context, pod *v1.Pod, st *container.PodStatus) (bool, time.Duration, error) {
	op := "sync"
	if st == nil || len(st.Sandboxes) == 0 {
		op = "create"
	}
	defer k.observeWorker(op, k.clock.Now())
	pod = k.allocatedPod(pod) // run as allocated; a resize waiting is not
	untilDeadline := k.checkActiveDeadline(pod, k.clock.Now())
	if err := k.prepare(ctx, pod); err != nil {
		return false, 0, err
	}
	s := k.computeStatus(pod, st, false)
	if podstatus.IsTerminal(s.Phase) {
		klog.V(2).InfoS("Pod is terminal", "pod", klog.KObj(pod), "phase", s.Phase)
		return true, 0, nil
	}
	run, err := k.prestart(ctx, pod)
	if err != nil {
		return false, 0, err
	}
	res := k.runtime.SyncPod(ctx, pod, st, run.volumes)
	k.setWaiting(pod.UID, res.Waiting)
	k.afterResize(pod, st, res)
	if res.Started || res.Resized {
		// Report what was just started now, not after the next relist
		// (up to a PLEG period later).
		read := k.clock.Now()
		if fresh, err := k.runtime.GetPodStatus(ctx, refOf(pod)); err == nil {
			st = fresh
			if res.Resized {
				// A relist sees no change in a resize (no container
				// changed state): without this the cache, and every
				// later sync's status, would keep the old resources.
				k.cache.Set(pod.UID, fresh, nil, read)
			}
		}
	}
	k.computeStatus(pod, st, false)
	if untilDeadline > 0 && (res.RequeueAfter <= 0 || untilDeadline < res.RequeueAfter) {
		res.RequeueAfter = untilDeadline // a sync then fails the pod
	}
	return false, res.RequeueAfter, res.Err
}

// SyncTerminatingPod stops every container and sandbox of the pod.
func (k *Kubelet) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, st *container.PodStatus, grace *int64) error {
	defer k.observeWorker("kill", k.clock.Now())
	if pod != nil {
		// A pod being stopped is not killed for failing probes meanwhile.
		k.prober.StopLivenessAndStartup(pod.UID)
	}
	if err := k.runtime.KillPod(ctx, pod, st, grace); err != nil {
		if pod != nil { // the worker retries; say so on the pod, as upstream
			k.recorder.Eventf(pod, v1.EventTypeWarning, "FailedKillPod", "error killing pod: %v", err)
		}
		return fmt.Errorf("kill pod: %w", err)
	}
	if pod == nil {
		return nil
	}
	// Record final container states: read them now rather than wait a relist.
	final, err := k.runtime.GetPodStatus(ctx, refOf(pod))
	if err != nil {
		return fmt.Errorf("read final status: %w", err)
	}
	k.setWaiting(pod.UID, nil)
	k.computeStatus(k.allocatedPod(pod), final, true)
	k.statuses.TerminatePod(pod)
	// An ended pod gives its volumes back now, as upstream's does, not
	// when it is deleted: a claim's volume is unpublished and unstaged,
	// free to detach or delete, while the pod stays for its status and
	// logs. A failure is retried with the rest of this step.
	if err := k.volumeManager.TearDownVolumes(ctx, pod.UID); err != nil {
		k.recorder.Eventf(pod, v1.EventTypeWarning, "FailedUnMount", "Unable to tear down the volumes of the ended pod: %v", err)
		return fmt.Errorf("tear down volumes: %w", err)
	}
	if k.resize.enabled {
		k.resize.Retry() // what the pod held is free: deferred resizes may fit
	}
	return nil
}

// SyncTerminatedPod removes what the runtime keeps of a pod no source
// wants any more, then forgets the pod.
func (k *Kubelet) SyncTerminatedPod(ctx context.Context, _ *v1.Pod, st *container.PodStatus) error {
	if err := k.runtime.RemovePod(ctx, st); err != nil {
		return fmt.Errorf("remove pod: %w", err)
	}
	return k.teardownPod(ctx, container.PodRef{UID: st.ID, Name: st.Name, Namespace: st.Namespace})
}

func (k *Kubelet) observeWorker(op string, start time.Time) {
	k.cfg.Metrics.PodWorkerDuration.WithLabelValues(op).Observe(k.clock.Since(start).Seconds())
}

// computeStatus computes the pod's API status and hands it to the status
// manager, which keeps it and reports it. It returns the status as
// computed, whose phase may be terminal before the stored one is.
func (k *Kubelet) computeStatus(pod *v1.Pod, st *container.PodStatus, terminating bool) v1.PodStatus {
	for {
		// A readiness result recorded meanwhile (setReadiness) is not
		// overwritten: the status is computed again, with it.
		old, version, ok := k.statuses.StatusVersion(pod.UID)
		if !ok {
			old = pod.Status
		}
		if s, stored := k.generateStatus(pod, st, old, terminating); k.statuses.SetPodStatusAt(pod, stored, version) {
			k.prober.StatusStored(pod.UID)
			return s
		}
	}
}

// generateStatus computes the pod's status from the runtime's and the
// one recorded (old): as computed (s), and as it is to be recorded.
func (k *Kubelet) generateStatus(pod *v1.Pod, st *container.PodStatus, old v1.PodStatus, terminating bool) (s, stored v1.PodStatus) {
	rec := k.records.get(pod.UID)
	s = podstatus.Generate(podstatus.Input{
		Pod:         pod,
		Runtime:     st,
		Waiting:     rec.waiting,
		Old:         old,
		RuntimeName: k.cri.RuntimeName,
		HostIPs:     k.hostIPs,
		Now:         k.clock.Now(),
		Terminating: terminating,
		Probes:      k.prober,
		Resize:      k.statusResize(pod),
	})
	applyFailure(rec.failure, &s)
	// The phase decides the pod's course (a terminal pod's worker stops
	// it); the status stored holds it back until its containers stopped.
	stored = *s.DeepCopy()
	holdTerminalPhase(old, &stored, st)
	// Before the status is stored: once reported, the start is over.
	k.startup.Status(pod, &stored)
	return s, stored
}

// setReadiness marks a container ready or not in its pod's recorded
// status as soon as its readiness probe's result changes, as upstream's
// status manager does: the pod's sync that follows waits for a fresh
// look at the runtime, which a batch of starting pods makes slow, and
// would hold the pod's Ready back meanwhile.
//
// It returns whether the recorded status now shows the result: then no
// sync is needed for it, since readiness changes nothing in the runtime,
// and a sync computing the status meanwhile computes it again with the
// result (computeStatus). It does not when the recorded status has not
// yet caught up with the container.
func (k *Kubelet) setReadiness(u prober.Update) bool {
	shown := false
	k.statuses.UpdateStatus(u.PodUID, func(pod *v1.Pod, s *v1.PodStatus) bool {
		changed, found := podstatus.SetContainerReadiness(pod, s, u.ContainerID, u.Result == prober.Success, k.clock.Now())
		shown = found
		if changed {
			k.startup.Status(pod, s) // a pod's start ends once it is Ready
		}
		return changed
	})
	return shown
}

func (k *Kubelet) setWaiting(uid types.UID, w map[string]*podruntime.ContainerError) {
	k.records.update(uid, func(r *podRecord) { r.waiting = w })
}
