package kubelet

import (
	"context"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/admission"
	"github.com/skiff-sh/skiff/internal/cri"
	"github.com/skiff-sh/skiff/internal/podstatus"
	"github.com/skiff-sh/skiff/internal/podworker"
	"github.com/skiff-sh/skiff/internal/shutdown"
)

// admit decides whether a new pod may run here. A pod already finished is
// not judged again, as upstream. Every other pod must pass the node-local
// checks (sysctls, AppArmor, host ports), unless the runtime already
// runs it the node-pressure checks, and get the devices of their limits;
// while the node shuts down every pod is refused, as upstream; apiserver
// pods must also fit the Node. A rejected pod is Failed with the reason
// and never started; an apiserver pod that arrives before the Node is
// known waits.
func (k *Kubelet) admit(ctx context.Context, p *v1.Pod) bool {
	if podstatus.IsTerminal(p.Status.Phase) {
		k.setAdmission(p, admitted)
		return true
	}
	if r := k.local.Admit(p, k.activePods()); !r.Admit {
		k.reject(p, r)
		return false
	}
	if r := admission.Pressure(k.pressureConditions(), p); !r.Admit && !k.adopted(ctx, p) {
		k.reject(p, r)
		return false
	}
	if k.shutdown.Status() != nil { // static pods too, as upstream
		k.reject(p, admission.Result{Reason: shutdown.NotAdmittedReason, Message: shutdown.NotAdmittedMessage})
		return false
	}
	node, cluster := k.cluster.node()
	static := IsStaticPod(p) || !cluster // static pods are the node's own, as upstream
	if !static && node == nil {
		k.setAdmission(p, pending)
		return false
	}
	// Devices before the fit, as upstream's admit handlers run.
	if r := k.admitDevices(ctx, p); !r.Admit {
		k.reject(p, r)
		return false
	}
	if static {
		k.setAdmission(p, admitted)
		return true
	}
	// As allocated: after a restart, a resize accepted before counts,
	// and one still pending does not.
	r := admission.Admit(node, k.allocatedPod(p), k.resize.AllocatedAll(k.activePods()))
	if r.Admit {
		k.setAdmission(p, admitted)
		return true
	}
	k.reject(p, r)
	return false
}

// adopted says whether the runtime already has a sandbox of the pod: a
// pod admitted before Skiff restarted. Pressure admission keeps new pods
// off a node under pressure; a pod already running there is the eviction
// manager's to judge, by its usage, not admission's to fail unmeasured.
// Upstream has no such rule, but there the first eviction pass in practice
// comes after the running pods are admitted again; Skiff's may come first.
// Asked only when pressure would refuse the pod: one runtime call then.
func (k *Kubelet) adopted(ctx context.Context, p *v1.Pod) bool {
	sbs, err := k.cri.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{cri.PodUIDLabel: string(p.UID)},
	})
	if err != nil {
		klog.ErrorS(err, "Cannot tell whether the runtime runs the pod; judging it as new", "pod", klog.KObj(p))
		return false
	}
	return len(sbs) > 0
}

func (k *Kubelet) setAdmission(p *v1.Pod, a verdict) {
	k.records.update(p.UID, func(r *podRecord) { r.verdict = a })
	if a == admitted && k.resize.enabled {
		k.resize.Admitted(p)
	}
}

// reject fails a pod admission refused, with an event and its status.
func (k *Kubelet) reject(p *v1.Pod, r admission.Result) {
	msg := "Pod was rejected: " + r.Message
	klog.InfoS("Pod rejected", "pod", klog.KObj(p), "reason", r.Reason, "message", r.Message)
	k.recorder.Eventf(p, v1.EventTypeWarning, r.Reason, "%s", msg)
	k.setAdmission(p, rejected)
	k.devices.Release(p.UID) // a check after the devices' may refuse it
	s := v1.PodStatus{Phase: v1.PodFailed, Reason: r.Reason, Message: msg, QOSClass: p.Status.QOSClass}
	k.statuses.SetPodStatus(p, s)
	k.statuses.TerminatePod(p) // nothing runs: deletion may proceed at once
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

// pendingPods are the wanted pods waiting for the Node.
func (k *Kubelet) pendingPods() []*v1.Pod {
	var out []*v1.Pod
	for _, uid := range k.records.with(func(r podRecord) bool { return r.verdict == pending }) {
		if p, ok := k.pods.get(uid); ok {
			out = append(out, p)
		}
	}
	return out
}
