//go:build e2e

package e2e

import (
	"regexp"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// A memory limit below what the container uses is not set: the resize
// stays in progress with reason Error and upstream's message, the
// container keeps running with its old limit (no OOM kill), and a limit
// above its usage then goes through.
func TestResizeMemoryBelowUsageIsRefused(t *testing.T) {
	resizeMemoryBelowUsageIsRefused(t, sharedNode(t))
}

func resizeMemoryBelowUsageIsRefused(t *testing.T, cn *clusterNode) {
	// 40 MiB in the container's /dev/shm, charged to its memory cgroup.
	p := busyboxPod("resize-memory", "dd if=/dev/zero of=/dev/shm/fill bs=1M count=40 && touch /tmp/filled && "+sleeper)
	p.Spec.Containers[0].Resources = res("100m", "64Mi", "", "128Mi")
	p.Spec.Containers[0].ReadinessProbe = &v1.Probe{
		ProbeHandler:  v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"test", "-e", "/tmp/filled"}}},
		PeriodSeconds: 1,
	}
	cn.createPod(t, p)
	p = cn.waitPod(t, cn.ns, p.Name, 60*time.Second, "Ready (memory filled)", isReady)
	id := statusOf(p, "main").ContainerID
	_, ctrCg := containerCgroup(cn.cgroupRoot(), p, "main")

	gen := cn.resize(t, p.Name, false, map[string]v1.ResourceRequirements{"main": res("100m", "16Mi", "", "24Mi")})
	got := cn.waitPod(t, cn.ns, p.Name, 60*time.Second, "resize refused", func(p *v1.Pod) bool {
		c := resizeCondition(p, v1.PodResizeInProgress)
		return p.Status.ObservedGeneration >= gen && c != nil && c.Reason == v1.PodReasonError
	})
	msg := resizeCondition(got, v1.PodResizeInProgress).Message
	// The container's refusal, alone or after the pod's in an aggregate's
	// brackets: upstream's kubelet reads the pod's usage from cAdvisor's
	// last housekeeping, which may predate the fill (and it prints the
	// pod's usage in the container's refusal), Skiff from the cgroup.
	ctrPart := `attempting to set container "main" memory limit \(25165824\) below current usage \(\d+\)`
	want := regexp.MustCompile(`^cannot decrease memory limits: (` + ctrPart +
		`|\[attempting to set pod memory limit \(25165824\) below current usage \(\d+\), ` + ctrPart + `\])$`)
	if !want.MatchString(msg) {
		t.Errorf("PodResizeInProgress message %q, want upstream's", msg)
	}
	if cs := statusOf(got, "main"); cs.ContainerID != id || cs.RestartCount != 0 || cs.State.Running == nil {
		t.Errorf("container %s restarts %d running %v: want it untouched", cs.ContainerID, cs.RestartCount, cs.State.Running != nil)
	}
	if m := cgroupFile(t, "memory", ctrCg, "memory.limit_in_bytes"); m != "134217728" {
		t.Errorf("container memory limit %s, want the old 128Mi kept", m)
	}

	to := res("100m", "64Mi", "", "96Mi")
	gen = cn.resize(t, p.Name, false, map[string]v1.ResourceRequirements{"main": to})
	got = cn.waitResized(t, p.Name, gen, map[string]v1.ResourceRequirements{"main": to})
	if cs := statusOf(got, "main"); cs.ContainerID != id || cs.RestartCount != 0 {
		t.Errorf("container %s restarts %d after the resize above usage", cs.ContainerID, cs.RestartCount)
	}
	if m := cgroupFile(t, "memory", ctrCg, "memory.limit_in_bytes"); m != "100663296" {
		t.Errorf("container memory limit %s, want 96Mi", m)
	}
}
