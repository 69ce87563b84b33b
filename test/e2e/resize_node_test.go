//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// On a node with 600m of allocatable CPU (system-reserved takes the
// rest): a resize past allocatable is Infeasible and one past
// what the other pods leave is Deferred, each with upstream's message
// and without touching the container; the deferred one is done once the
// pod holding the CPU is deleted.
func TestResizeInfeasibleAndDeferred(t *testing.T) {
	cn := newPrivateClusterNode(t)
	cn.start("--system-reserved", "cpu="+resizeReservedCPU())
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	resizeInfeasibleAndDeferred(t, cn)
}

// resizeReservedCPU is the system-reserved CPU that leaves a node of this
// machine 600m of allocatable CPU.
func resizeReservedCPU() string { return fmt.Sprintf("%dm", runtime.NumCPU()*1000-600) }

func resizeInfeasibleAndDeferred(t *testing.T, cn *clusterNode) {
	waitFor(t, 30*time.Second, "allocatable cpu 600m", func() (bool, error) {
		a := cn.getNode(t).Status.Allocatable[v1.ResourceCPU]
		return a.MilliValue() == 600, nil
	})
	hog := busyboxPod("resize-hog", sleeper)
	hog.Spec.Containers[0].Resources = res("400m", "", "", "")
	waiter := busyboxPod("resize-waiter", sleeper)
	waiter.Spec.Containers[0].Resources = res("100m", "", "", "")
	cn.createPod(t, hog)
	cn.createPod(t, waiter)
	w := cn.waitPod(t, cn.ns, waiter.Name, 60*time.Second, "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	_, ctrCg := containerCgroup(cn.cgroupRoot(), w, "main")

	pendingIs := func(gen int64, reason, msg string) {
		t.Helper()
		p := cn.waitPod(t, cn.ns, waiter.Name, 60*time.Second, "resize "+reason, func(p *v1.Pod) bool {
			c := resizeCondition(p, v1.PodResizePending)
			return c != nil && c.Reason == reason && c.ObservedGeneration == gen
		})
		c := resizeCondition(p, v1.PodResizePending)
		if c.Status != v1.ConditionTrue || c.Message != msg {
			t.Errorf("%s: condition %s %q, want True %q", reason, c.Status, c.Message, msg)
		}
		if r := statusOf(p, "main").Resources; r == nil || !sameResources(*r, res("100m", "", "", "")) {
			t.Errorf("%s: status resources %+v, want the allocated 100m", reason, r)
		}
		if s := cgroupFile(t, "cpu", ctrCg, "cpu.shares"); s != "102" {
			t.Errorf("%s: container cpu.shares %s, want 102 (100m) untouched", reason, s)
		}
	}
	gen := cn.resize(t, waiter.Name, false, map[string]v1.ResourceRequirements{"main": res("1", "", "", "")})
	pendingIs(gen, v1.PodReasonInfeasible, "Node didn't have enough capacity: cpu, requested: 1000, capacity: 600")
	gen = cn.resize(t, waiter.Name, false, map[string]v1.ResourceRequirements{"main": res("300m", "", "", "")})
	pendingIs(gen, v1.PodReasonDeferred, "Node didn't have enough resource: cpu, requested: 300, used: 400, capacity: 600")

	must(t, cn.admin.CoreV1().Pods(cn.ns).Delete(cn.ctx(), hog.Name, metav1.DeleteOptions{}))
	got := cn.waitResized(t, waiter.Name, gen, map[string]v1.ResourceRequirements{"main": res("300m", "", "", "")})
	if cs := statusOf(got, "main"); cs.RestartCount != 0 || cs.ContainerID != statusOf(w, "main").ContainerID {
		t.Errorf("container %s restarts %d, want it resized in place", cs.ContainerID, cs.RestartCount)
	}
	if s := cgroupFile(t, "cpu", ctrCg, "cpu.shares"); s != "307" {
		t.Errorf("container cpu.shares %s after the deferred resize, want 307 (300m)", s)
	}
}

// A resize survives restarts of Skiff: one made while Skiff is down is
// applied once it is back, and a RestartContainer resize done before a
// restart is not done again after it (the allocation and what the
// runtime was given are checkpointed in the root directory).
func TestResizeSurvivesSkiffRestart(t *testing.T) {
	cn := newPrivateClusterNode(t)
	cn.start()
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	resizeSurvivesRestart(t, cn)
}

// resizeSurvivesRestart is TestResizeSurvivesSkiffRestart's body on a
// started node whose kubelet it may stop and start.
func resizeSurvivesRestart(t *testing.T, cn *clusterNode) {
	p := busyboxPod("resize-restart", sleeper)
	p.Spec.Containers[0].Resources = res("100m", "32Mi", "100m", "32Mi")
	p.Spec.Containers[0].ResizePolicy = []v1.ContainerResizePolicy{{ResourceName: v1.ResourceMemory, RestartPolicy: v1.RestartContainer}}
	cn.createPod(t, p)
	cn.waitPod(t, cn.ns, p.Name, 60*time.Second, "Ready", isReady)

	step := func(what string, to v1.ResourceRequirements, restarts int32, memory string) *v1.Pod {
		t.Helper()
		gen := cn.resize(t, p.Name, false, map[string]v1.ResourceRequirements{"main": to})
		if what == "while the kubelet is down" {
			// A restarted kubelet (Skiff as upstream's) may report the new
			// generation before it decides the resize: wait for its effect.
			cn.start()
			cn.waitPod(t, cn.ns, p.Name, 60*time.Second, "restarted for its new memory", func(p *v1.Pod) bool {
				return statusOf(p, "main").RestartCount >= restarts
			})
		}
		cn.waitResized(t, p.Name, gen, map[string]v1.ResourceRequirements{"main": to})
		got := cn.waitPod(t, cn.ns, p.Name, 60*time.Second, "Ready", isReady)
		if cs := statusOf(got, "main"); cs.RestartCount != restarts {
			t.Errorf("%s: restarts %d, want %d", what, cs.RestartCount, restarts)
		}
		_, ctrCg := containerCgroup(cn.cgroupRoot(), got, "main")
		if m := cgroupFile(t, "memory", ctrCg, "memory.limit_in_bytes"); m != memory {
			t.Errorf("%s: memory limit %s, want %s", what, m, memory)
		}
		return got
	}
	step("before the restarts", res("100m", "48Mi", "100m", "48Mi"), 1, "50331648")
	for _, f := range []string{"allocated_pods_state", "actuated_pods_state"} {
		if _, err := os.Stat(filepath.Join(cn.root, f)); err != nil {
			t.Errorf("checkpoint %s: %v", f, err)
		}
	}

	cn.stop()
	step("while the kubelet is down", res("100m", "64Mi", "100m", "64Mi"), 2, "67108864")

	// Restarted again, the kubelet syncs the pod (a CPU resize, in place, shows
	// it has) without applying the memory resize a second time.
	cn.stop()
	cn.start()
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	got := step("after another restart", res("200m", "64Mi", "200m", "64Mi"), 2, "67108864")
	_, ctrCg := containerCgroup(cn.cgroupRoot(), got, "main")
	if q := cgroupFile(t, "cpu", ctrCg, "cpu.cfs_quota_us"); q != "20000" {
		t.Errorf("cpu quota %s after the in-place CPU resize, want 20000", q)
	}
}
