package statusmanager

import (
	"context"
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/klog/v2"
)

// syncPod writes one pod's status, or deletes its API object.
func (m *Manager) syncPod(ctx context.Context, uid types.UID) {
	m.mu.Lock()
	e := m.entries[uid]
	if e == nil {
		m.mu.Unlock()
		return
	}
	pod, status, version, prev := e.pod, e.status, e.version, e.patched
	deleteNow := m.mayDelete(e)
	m.mu.Unlock()

	target, ok := m.pods.Latest(pod)
	if !ok {
		return // a static pod without its mirror pod yet: nothing to report on
	}
	target = newer(target, prev)
	if deleteNow && target.UID == pod.UID {
		m.deletePod(ctx, uid, target)
		return
	}
	merged := mergeStatus(target.Status, status)
	patch, err := statusPatch(target, merged)
	if err != nil {
		klog.ErrorS(err, "Cannot compute status patch", "pod", klog.KObj(pod))
		return
	}
	var result *v1.Pod
	if patch != nil {
		result, err = m.client.Pods(target.Namespace).Patch(ctx, target.Name,
			types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
		switch {
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err) && target.UID == pod.UID:
			// Gone, or replaced by a pod of the same name: nothing to report on.
			klog.V(3).InfoS("Pod is gone from the apiserver; not reporting its status", "pod", klog.KObj(pod), "err", err)
			return
		case err != nil:
			klog.InfoS("Failed to update pod status, will retry", "pod", klog.KObj(pod), "err", err)
			return
		}
		klog.V(3).InfoS("Pod status reported", "pod", klog.KObj(pod), "phase", merged.Phase)
	}
	m.mu.Lock()
	if e := m.entries[uid]; e != nil {
		if e.synced < version {
			e.synced = version
		}
		if result != nil {
			e.patched = result
		}
		if m.mayDelete(e) {
			m.markDirty()
		}
	}
	m.mu.Unlock()
}

// deletePod removes the API object of a deleted, fully stopped pod with
// grace 0: Skiff already gave the containers their grace period.
func (m *Manager) deletePod(ctx context.Context, uid types.UID, target *v1.Pod) {
	opts := metav1.DeleteOptions{
		GracePeriodSeconds: new(int64),
		Preconditions:      &metav1.Preconditions{UID: &target.UID},
	}
	err := m.client.Pods(target.Namespace).Delete(ctx, target.Name, opts)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		klog.InfoS("Failed to delete pod, will retry", "pod", klog.KObj(target), "err", err)
		return
	}
	klog.V(2).InfoS("Pod deleted from the apiserver", "pod", klog.KObj(target))
	m.mu.Lock()
	if e := m.entries[uid]; e != nil {
		e.deleted = true
	}
	m.mu.Unlock()
}

// statusPatch is a strategic merge patch from the target's status to s,
// carrying the target's UID as a precondition; nil when nothing changes.
func statusPatch(target *v1.Pod, s v1.PodStatus) ([]byte, error) {
	oldJSON, err := json.Marshal(v1.Pod{Status: target.Status})
	if err != nil {
		return nil, err
	}
	newJSON, err := json.Marshal(v1.Pod{Status: s})
	if err != nil {
		return nil, err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, v1.Pod{})
	if err != nil {
		return nil, fmt.Errorf("create patch: %w", err)
	}
	if string(patch) == "{}" {
		return nil, nil
	}
	var p map[string]any
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, err
	}
	p["metadata"] = map[string]any{"uid": target.UID} // the apiserver refuses it for another pod
	return json.Marshal(p)
}
