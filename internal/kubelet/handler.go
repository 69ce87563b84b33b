package kubelet

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/metrics"
	"github.com/skiff-sh/skiff/internal/podruntime"
	"github.com/skiff-sh/skiff/internal/podstartup"
	"github.com/skiff-sh/skiff/internal/status"
)

// The podworker.Handler of the kubelet: each phase does the runtime work and
// records the pod's status.

func (k *Kubelet) SyncPod(ctx context.Context, pod *v1.Pod, st *container.PodStatus) (bool, time.Duration, error) {
	op := "sync"
	if st == nil || len(st.Sandboxes) == 0 {
		op = "create"
	}
	defer observeWorker(op, time.Now())
	untilDeadline := k.checkActiveDeadline(pod, time.Now())
	// Probe workers first, so that no status says ready unprobed (a
	// terminal pod's workers end at once).
	k.prober.AddPod(pod)
	s := k.computeStatus(pod, st, false)
	if k.client != nil && IsStaticPod(pod) {
		if err := k.syncMirrorPod(ctx, pod); err != nil {
			klog.ErrorS(err, "Failed to sync mirror pod", "pod", klog.KObj(pod))
		}
	}
	if status.IsTerminal(s.Phase) {
		klog.V(2).InfoS("Pod is terminal", "pod", klog.KObj(pod), "phase", s.Phase)
		return true, 0, nil
	}
	k.startup.SyncStarted(pod.UID)
	began := time.Now()
	vols, err := k.volumes.SetUp(ctx, pod)
	k.startup.Observe(pod.UID, podstartup.Volumes, "", time.Since(began))
	if err != nil {
		k.recorder.Eventf(pod, v1.EventTypeWarning, "FailedMount", "Unable to attach or mount volumes: %v", err)
		return false, 0, fmt.Errorf("set up volumes: %w", err)
	}
	if err := k.cgroups.EnsurePod(pod); err != nil {
		return false, 0, fmt.Errorf("pod cgroup: %w", err)
	}
	res := k.runtime.SyncPod(ctx, pod, st, vols)
	k.setWaiting(pod.UID, res.Waiting)
	if res.Started {
		// Report what was just started now, not after the next relist
		// (up to a PLEG period later).
		if fresh, err := k.runtime.GetPodStatus(ctx, refOf(pod)); err == nil {
			st = fresh
		}
	}
	k.computeStatus(pod, st, false)
	if untilDeadline > 0 && (res.RequeueAfter <= 0 || untilDeadline < res.RequeueAfter) {
		res.RequeueAfter = untilDeadline // a sync then fails the pod
	}
	return false, res.RequeueAfter, res.Err
}

func (k *Kubelet) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, st *container.PodStatus, grace *int64) error {
	defer observeWorker("kill", time.Now())
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
	k.computeStatus(pod, final, true)
	if k.statusMgr != nil {
		k.statusMgr.TerminatePod(pod)
	}
	return nil
}

func (k *Kubelet) SyncTerminatedPod(ctx context.Context, pod *v1.Pod, st *container.PodStatus) error {
	if err := k.runtime.RemovePod(ctx, st); err != nil {
		return fmt.Errorf("remove pod: %w", err)
	}
	if err := k.volumes.TearDown(ctx, st.ID); err != nil {
		return fmt.Errorf("tear down volumes: %w", err)
	}
	if err := k.cgroups.RemovePod(st.ID); err != nil {
		// Housekeeping retries it as an orphan.
		klog.ErrorS(err, "Failed to remove pod cgroup", "podUID", st.ID)
	}
	k.prober.RemovePod(st.ID)
	k.statuses.Delete(st.ID)
	k.setWaiting(st.ID, nil)
	metrics.PodStarts.Forget(st.ID)
	metrics.ForgetPodProbes(st.Namespace, st.Name, st.ID)
	k.mu.Lock()
	delete(k.failed, st.ID)
	k.mu.Unlock()
	return nil
}

func observeWorker(op string, start time.Time) {
	metrics.PodWorkerDuration.WithLabelValues(op).Observe(time.Since(start).Seconds())
}

// computeStatus computes the pod's API status, stores it and hands it to
// the status manager.
func (k *Kubelet) computeStatus(pod *v1.Pod, st *container.PodStatus, terminating bool) v1.PodStatus {
	old, ok := k.statuses.Get(pod.UID)
	if !ok {
		old = pod.Status
	}
	s := status.Generate(status.Input{
		Pod:         pod,
		Runtime:     st,
		Waiting:     k.waiting(pod.UID),
		Old:         old,
		RuntimeName: k.cri.RuntimeName,
		HostIPs:     k.hostIPs,
		Now:         time.Now(),
		Terminating: terminating,
		Probes:      k.prober,
	})
	k.applyFailure(pod.UID, &s)
	k.statuses.Set(pod.UID, s)
	k.prober.StatusStored(pod.UID)
	if isReady(s) {
		k.startup.Ready(pod)
	}
	metrics.PodStarts.Status(pod, &s, time.Now())
	if k.statusMgr != nil {
		k.statusMgr.SetPodStatus(pod, s)
	}
	return s
}

func (k *Kubelet) setWaiting(uid types.UID, w map[string]*podruntime.ContainerError) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(w) == 0 {
		delete(k.reasons, uid)
		return
	}
	k.reasons[uid] = w
}

func (k *Kubelet) waiting(uid types.UID) map[string]*podruntime.ContainerError {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.reasons[uid]
}
