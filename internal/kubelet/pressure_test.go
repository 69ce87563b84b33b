package kubelet

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
)

// A Kubelet restarted while the node is under disk pressure adopts the
// pods the runtime runs: pressure admission keeps new pods off the node,
// not the pods already on it, which the eviction manager then judges by
// their usage. A pod that had finished keeps its phase.
//
// The pressure is real: nodefs.available is the test directory's
// filesystem, and the threshold asks for 99% of it free. The new Kubelet
// gets its pods from the apiserver only once its eviction manager has
// seen the pressure, so admission judges them under it.
func TestRestartUnderDiskPressureAdoptsRunningPods(t *testing.T) {
	ctx := context.Background()
	m := newMachine(t)
	_, stop := m.start()
	m.createPod(newPod("kept"))
	kept := m.waitPod("kept", "running", running)
	done := newPod("done")
	done.Spec.RestartPolicy = v1.RestartPolicyNever
	m.createPod(done)
	d := m.waitPod("done", "running", running)
	if err := m.rt.StopContainer(ctx, strings.TrimPrefix(d.Status.ContainerStatuses[0].ContainerID, "fake://"), 0); err != nil {
		t.Fatal(err)
	}
	m.waitPod("done", "succeeded", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded })
	stop()
	// What container GC leaves of a finished pod on a node that has run
	// for a while: nothing in the runtime.
	for _, c := range m.containers(d.UID) {
		if err := m.rt.RemoveContainer(ctx, c.Id); err != nil {
			t.Fatal(err)
		}
	}
	for _, sb := range m.sandboxes(d.UID) {
		if err := m.rt.RemovePodSandbox(ctx, sb.Id); err != nil {
			t.Fatal(err)
		}
	}

	m.tune = func(kc *kubeletconfig.KubeletConfiguration) {
		kc.EvictionHard = map[string]string{"nodefs.available": "99%"}
	}
	gate := make(chan struct{})
	m.client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		select {
		case <-gate:
		case <-time.After(waitTimeout):
		}
		return false, nil, nil
	})
	created, sandboxes := m.calls("CreateContainer"), m.calls("RunPodSandbox")
	k, _ := m.start()
	m.eventually("DiskPressure observed", func() bool {
		return slices.Contains(k.pressureConditions(), v1.NodeDiskPressure)
	})
	close(gate)

	m.eventually("the running pod adopted", func() bool { return k.records.get(kept.UID).verdict == admitted })
	keptID := kept.Status.ContainerStatuses[0].ContainerID
	if p := m.apiPod("kept"); !running(p) || p.Status.ContainerStatuses[0].ContainerID != keptID {
		t.Errorf("the adopted pod after the restart: %+v, want its container %s running", p.Status, keptID)
	}
	// The eviction manager may evict it meanwhile, which stops it; nothing
	// is restarted or recreated all the same.
	m.holds("nothing restarted", func() bool {
		p := m.apiPod("kept")
		return p.Status.ContainerStatuses[0].ContainerID == keptID &&
			m.calls("CreateContainer") == created && m.calls("RunPodSandbox") == sandboxes
	})
	if p := m.apiPod("done"); p.Status.Phase != v1.PodSucceeded || p.Status.Reason != "" {
		t.Errorf("the finished pod is %s (%s: %s) after the restart, want Succeeded", p.Status.Phase, p.Status.Reason, p.Status.Message)
	}

	// A new pod is refused while the pressure lasts.
	m.createPod(newPod("late"))
	late := m.waitPod("late", "refused", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if late.Status.Reason != "Evicted" || !strings.Contains(late.Status.Message, "The node had condition: [DiskPressure]") {
		t.Errorf("the new pod failed with %q: %q, want Evicted for the node's DiskPressure", late.Status.Reason, late.Status.Message)
	}
	if sbs := m.sandboxes(late.UID); len(sbs) != 0 {
		t.Errorf("the refused pod got sandboxes: %v", sbs)
	}

	// The adopted pod is the eviction manager's: its next look evicts it
	// for the resource, not for a condition.
	evicted := m.waitPod("kept", "evicted", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if evicted.Status.Reason != "Evicted" || !strings.Contains(evicted.Status.Message, "The node was low on resource: ephemeral-storage.") {
		t.Errorf("the adopted pod failed with %q: %q, want Evicted for ephemeral-storage", evicted.Status.Reason, evicted.Status.Message)
	}
}
