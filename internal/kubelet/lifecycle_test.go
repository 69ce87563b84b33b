package kubelet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// A pod bound to the node runs, its status reaches the apiserver, and a
// graceful delete stops its containers, deletes its API object and tears
// down everything Skiff kept of it.
func TestPodRunsReportsAndIsDeleted(t *testing.T) {
	m := newMachine(t)
	k, _ := m.start()
	m.createPod(newPod("web"))

	p := m.waitPod("web", "running", running)
	cs := p.Status.ContainerStatuses[0]
	if !cs.Ready || cs.RestartCount != 0 || cs.ContainerID == "" {
		t.Errorf("container status %+v, want ready, no restarts, an ID", cs)
	}
	if len(p.Status.HostIPs) != 1 || p.Status.HostIPs[0].IP != "10.0.0.1" || p.Status.PodIP == "" {
		t.Errorf("host IPs %v, pod IP %q", p.Status.HostIPs, p.Status.PodIP)
	}
	if ctrs := m.containers(p.UID); len(ctrs) != 1 || ctrs[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("runtime containers %v, want one running", ctrs)
	}
	if !m.cg.has(p.UID) {
		t.Error("no pod cgroup for a running pod")
	}
	// One start tracker observed the start, into this Kubelet's registry.
	for _, name := range []string{"kubelet_pod_start_duration_seconds", "skiff_pod_startup_duration_seconds"} {
		if n := histogramCount(t, k, name); n != 1 {
			t.Errorf("%s has %d observations, want 1", name, n)
		}
	}

	m.deletePod("web")
	m.eventually("the pod's API object deleted", func() bool { return m.apiPod("web") == nil })
	m.eventually("containers and sandboxes removed", func() bool {
		return len(m.containers(p.UID)) == 0 && len(m.sandboxes(p.UID)) == 0
	})
	m.eventually("the pod forgotten", func() bool { return m.forgotten(k, p.UID) })
	if m.calls("StopContainer") == 0 {
		t.Error("the container was never stopped")
	}
}

// A container failing its liveness probe is killed and started again, and
// the restart shows in its status.
func TestLivenessFailureRestartsContainer(t *testing.T) {
	m := newMachine(t)
	k, _ := m.start()
	p := newPod("probed")
	p.Spec.Containers[0].LivenessProbe = &v1.Probe{
		ProbeHandler:  v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}},
		PeriodSeconds: 1, FailureThreshold: 1, SuccessThreshold: 1, TimeoutSeconds: 1,
	}
	m.createPod(p)
	started := m.waitPod("probed", "running", running)
	uid, before := started.UID, started.Status.ContainerStatuses[0]

	m.rt.InjectError("ExecSync", exitError(1)) // the next probe fails
	after := m.waitPod("probed", "restarted", func(p *v1.Pod) bool {
		return running(p) && p.Status.ContainerStatuses[0].RestartCount == 1
	}).Status.ContainerStatuses[0]
	if after.ContainerID == before.ContainerID {
		t.Errorf("restarted container kept its ID %s", after.ContainerID)
	}
	if after.LastTerminationState.Terminated == nil {
		t.Errorf("no last termination state after the restart: %+v", after.LastTerminationState)
	}
	m.holds("one restart for one failed probe", func() bool {
		p := m.apiPod("probed")
		return p != nil && p.Status.ContainerStatuses[0].RestartCount == 1
	})
	if metricSeries(t, k, uid) == 0 {
		t.Error("no probe metrics for the probed pod")
	}

	m.deletePod("probed")
	m.eventually("the probed pod forgotten, its probe metrics too", func() bool { return m.forgotten(k, uid) })
}

// A Kubelet started again on the same runtime adopts the pods that run:
// it neither restarts nor recreates anything, and keeps reporting them.
func TestRestartAdoptsRunningPods(t *testing.T) {
	m := newMachine(t)
	_, stop := m.start()
	m.createPod(newPod("kept"))
	before := m.waitPod("kept", "running", running)
	stop()

	created, sandboxes := m.calls("CreateContainer"), m.calls("RunPodSandbox")
	stopped := m.calls("StopContainer") + m.calls("StopPodSandbox")
	inspected := m.calls("PodSandboxStatus")
	m.start()
	// The new Kubelet's PLEG reads the status of the pod it finds; its
	// worker syncs the pod right after, while the checks below hold.
	m.eventually("the running pod inspected", func() bool { return m.calls("PodSandboxStatus") > inspected })
	m.holds("nothing restarted", func() bool {
		return m.calls("CreateContainer") == created && m.calls("RunPodSandbox") == sandboxes &&
			m.calls("StopContainer")+m.calls("StopPodSandbox") == stopped
	})
	after := m.apiPod("kept")
	if !running(after) || after.Status.ContainerStatuses[0].ContainerID != before.Status.ContainerStatuses[0].ContainerID ||
		after.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("after restart: %+v, want the same container running", after.Status.ContainerStatuses)
	}
}

// A pod the runtime runs that no source wants (left from before a
// restart) is stopped and removed once: housekeeping does not take its
// stopped sandbox, waiting for its deferred removal, for a new orphan.
func TestOrphanIsCleanedUpOnce(t *testing.T) {
	m := newMachine(t)
	orphan := newPod("orphan")
	orphan.UID = "orphan-uid"
	m.runInRuntime(orphan)

	k, _ := m.start()
	m.eventually("the orphan's containers removed", func() bool { return len(m.containers(orphan.UID)) == 0 })
	m.eventually("the orphan's sandbox removed", func() bool { return len(m.sandboxes(orphan.UID)) == 0 })
	m.holds("nothing more done to the orphan", func() bool {
		return len(m.sandboxes(orphan.UID)) == 0
	})
	if n := m.calls("StopPodSandbox"); n != 1 {
		t.Errorf("the orphan's sandbox was stopped %d times, want once", n)
	}
	if n := m.calls("RemovePodSandbox"); n != 1 {
		t.Errorf("the orphan's sandbox was removed %d times, want once", n)
	}
	if !m.forgotten(k, orphan.UID) {
		t.Error("the Kubelet still keeps something of the orphan")
	}
}

// writeFile writes a manifest whole: written in place, the file source
// may read it half written.
func writeFile(t *testing.T, path, data string) {
	t.Helper()
	tmp := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// A pod admission refuses (an unsafe sysctl not allowed here) ends Failed
// with the reason, never reaches the runtime, is deleted at once when the
// apiserver deletes it, and is then forgotten.
func TestAdmissionRefusal(t *testing.T) {
	m := newMachine(t)
	k, _ := m.start()
	p := newPod("refused")
	p.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: "kernel.msgmax", Value: "65536"}}}
	m.createPod(p)
	got := m.waitPod("refused", "failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if got.Status.Reason != "SysctlForbidden" || !strings.Contains(got.Status.Message, "kernel.msgmax") {
		t.Errorf("status reason %q message %q, want SysctlForbidden naming the sysctl", got.Status.Reason, got.Status.Message)
	}
	m.createPod(newPod("admitted")) // a later pod is admitted: the loop went on
	m.waitPod("admitted", "running", running)
	if sbs := m.sandboxes(got.UID); len(sbs) != 0 {
		t.Errorf("a refused pod got sandboxes: %v", sbs)
	}

	m.deletePod("refused")
	m.eventually("the refused pod's API object deleted", func() bool { return m.apiPod("refused") == nil })
	m.eventually("the refused pod forgotten", func() bool { return m.forgotten(k, got.UID) })
}

// While the apiserver refuses status updates the pod runs on, and once
// it answers again the statuses it missed catch up.
func TestAPIServerOutageStatusesCatchUp(t *testing.T) {
	m := newMachine(t)
	m.start()
	m.createPod(newPod("before"))
	m.waitPod("before", "running", running)

	m.patchesDown.Store(true)
	m.createPod(newPod("during"))
	var uid types.UID
	m.eventually("the pod started in the runtime", func() bool {
		p := m.apiPod("during")
		if p == nil {
			return false
		}
		uid = p.UID
		cs := m.containers(uid)
		return len(cs) == 1 && cs[0].State == runtimeapi.ContainerState_CONTAINER_RUNNING
	})
	m.holds("no status reported during the outage", func() bool {
		return m.apiPod("during").Status.Phase == ""
	})

	m.patchesDown.Store(false)
	m.waitPod("during", "running once the apiserver is back", running)
}

func TestNewRefusesMissingDependencies(t *testing.T) {
	if _, err := New(Deps{}); err == nil {
		t.Fatal("New without a runtime, cgroups or configuration: no error")
	}
}

// Without an apiserver a static pod runs and shows its status on /pods,
// and a removed manifest stops it and leaves nothing behind.
func TestStandaloneStaticPod(t *testing.T) {
	m := newMachine(t)
	k, _ := m.startStandalone()
	manifest := filepath.Join(m.static, "alone.yaml")
	writeFile(t, manifest, `apiVersion: v1
kind: Pod
metadata:
  name: alone
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: busybox:test
`)
	var uid types.UID
	m.eventually("the static pod running on /pods", func() bool {
		for _, p := range k.Pods() {
			if p.Name == "alone-"+testNode && running(p) {
				uid = p.UID
				return true
			}
		}
		return false
	})
	if len(m.client.Actions()) != 0 {
		t.Errorf("a standalone kubelet called the apiserver: %v", m.client.Actions())
	}

	if err := os.Remove(manifest); err != nil {
		t.Fatal(err)
	}
	m.eventually("the static pod forgotten", func() bool {
		return len(k.Pods()) == 0 && len(m.containers(uid)) == 0 && m.forgotten(k, uid)
	})
}
