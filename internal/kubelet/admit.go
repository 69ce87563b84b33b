package kubelet

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/admission"
	"github.com/skiff-sh/skiff/internal/podworker"
)

// admit decides whether a new pod may run here. Every pod must pass the
// node-local checks (sysctls, AppArmor, host ports); apiserver pods must
// also fit the Node. A rejected pod is Failed with the reason and never
// started; an apiserver pod that arrives before the Node is known waits.
func (k *Kubelet) admit(p *v1.Pod) bool {
	if r := k.local.Admit(p, k.activePods()); !r.Admit {
		k.reject(p, r)
		return false
	}
	if r := admission.Pressure(k.pressureConditions(), p); !r.Admit {
		k.reject(p, r)
		return false
	}
	if IsStaticPod(p) || k.node == nil {
		return true // static pods are the node's own, as upstream
	}
	node := k.node.Node()
	if node == nil {
		k.mu.Lock()
		k.pending[p.UID] = true
		k.mu.Unlock()
		return false
	}
	k.mu.Lock()
	delete(k.pending, p.UID)
	k.mu.Unlock()
	r := admission.Admit(node, p, k.activePods())
	if r.Admit {
		return true
	}
	k.reject(p, r)
	return false
}

// reject fails a pod admission refused, with an event and its status.
func (k *Kubelet) reject(p *v1.Pod, r admission.Result) {
	msg := "Pod was rejected: " + r.Message
	klog.InfoS("Pod rejected", "pod", klog.KObj(p), "reason", r.Reason, "message", r.Message)
	k.recorder.Eventf(p, v1.EventTypeWarning, r.Reason, "%s", msg)
	k.mu.Lock()
	k.rejected[p.UID] = true
	k.mu.Unlock()
	s := v1.PodStatus{Phase: v1.PodFailed, Reason: r.Reason, Message: msg, QOSClass: p.Status.QOSClass}
	k.statuses.Set(p.UID, s)
	if k.statusMgr != nil {
		k.statusMgr.SetPodStatus(p, s)
		k.statusMgr.TerminatePod(p) // nothing runs: deletion may proceed at once
	}
}

// activePods are admitted pods that have not finished.
func (k *Kubelet) activePods() []*v1.Pod {
	var out []*v1.Pod
	for _, p := range k.pods.pods() {
		if phase, ok := k.workers.Phase(p.UID); ok && phase == podworker.Syncing && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func (k *Kubelet) isRejected(p *v1.Pod) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.rejected[p.UID]
}

func (k *Kubelet) pendingPods() []*v1.Pod {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []*v1.Pod
	for uid := range k.pending {
		if p, ok := k.pods.get(uid); ok {
			out = append(out, p)
		} else {
			delete(k.pending, uid)
		}
	}
	return out
}
