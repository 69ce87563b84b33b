package kubelet

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// A readiness probe's results show in the pod's status as they change: a
// failure turns the container and the pod unready within a probe period,
// with upstream's conditions, and the next success turns them ready
// again, the container running on throughout.
func TestReadinessFollowsTheProbe(t *testing.T) {
	m := newMachine(t)
	m.start()
	p := newPod("gated")
	p.Spec.Containers[0].ReadinessProbe = &v1.Probe{
		ProbeHandler:  v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}},
		PeriodSeconds: 1, FailureThreshold: 1, SuccessThreshold: 1, TimeoutSeconds: 1,
	}
	m.createPod(p)
	ready := m.waitPod("gated", "running and ready", func(p *v1.Pod) bool { return running(p) && podReady(p) == v1.ConditionTrue })
	id := ready.Status.ContainerStatuses[0].ContainerID

	m.rt.InjectError("ExecSync", exitError(1)) // the next probe fails
	var unready *v1.Pod
	m.within(2*time.Second, "the pod unready", func() bool {
		unready = m.apiPod("gated")
		return podReady(unready) == v1.ConditionFalse
	})
	cs := unready.Status.ContainerStatuses[0]
	if cs.Ready || cs.State.Running == nil || cs.ContainerID != id {
		t.Errorf("container status %+v, want the same container running, unready", cs)
	}
	for _, c := range unready.Status.Conditions {
		if (c.Type == v1.PodReady || c.Type == v1.ContainersReady) &&
			(c.Status != v1.ConditionFalse || c.Reason != "ContainersNotReady" || c.Message != "containers with unready status: [app]") {
			t.Errorf("condition %+v", c)
		}
	}
	// Not within a period: the next probe may come at once (an unready
	// pod's status, once stored, asks for one), and two patches that
	// close can leave the fake clientset's pod behind the status manager's
	// until its periodic reconcile, the fake keeping no resourceVersions.
	again := m.waitPod("gated", "ready again", func(p *v1.Pod) bool { return podReady(p) == v1.ConditionTrue })
	if cs := again.Status.ContainerStatuses[0]; !cs.Ready || cs.ContainerID != id || cs.RestartCount != 0 {
		t.Errorf("container status %+v, want the same container ready", cs)
	}
}

func podReady(p *v1.Pod) v1.ConditionStatus {
	if p == nil {
		return v1.ConditionUnknown
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status
		}
	}
	return v1.ConditionUnknown
}
