//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// appendConfig adds lines to the node's KubeletConfiguration.
func (n *node) appendConfig(yaml string) {
	n.t.Helper()
	appendNodeConfig(n.t, n, yaml)
}

// nodeCondition is the status of one of the node's conditions, "" if absent.
func (cn *clusterNode) nodeCondition(t *testing.T, typ v1.NodeConditionType) v1.ConditionStatus {
	t.Helper()
	for _, c := range cn.getNode(t).Status.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

func (cn *clusterNode) waitCondition(t *testing.T, typ v1.NodeConditionType, want v1.ConditionStatus, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, fmt.Sprintf("node %s=%s", typ, want), func() (bool, error) {
		return cn.nodeCondition(t, typ) == want, nil
	})
}

// memoryAvailable is the node's memory.available as upstream computes it
// on cgroup v1: MemTotal minus the root memory cgroup's working set
// (usage_in_bytes minus total_inactive_file).
func memoryAvailable(t *testing.T) int64 {
	t.Helper()
	kv := func(path string) map[string]int64 {
		b, err := os.ReadFile(path)
		must(t, err)
		out := map[string]int64{}
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) < 2 {
				continue
			}
			v, _ := strconv.ParseInt(f[1], 10, 64)
			if len(f) > 2 && f[2] == "kB" {
				v *= 1024
			}
			out[strings.TrimSuffix(f[0], ":")] = v
		}
		return out
	}
	total := kv("/proc/meminfo")["MemTotal"]
	root := "/sys/fs/cgroup/memory"
	if _, err := os.Stat(filepath.Join(root, "memory.usage_in_bytes")); err != nil {
		t.Skip("the memory test reads the cgroup v1 root; this host has none")
	}
	b, err := os.ReadFile(filepath.Join(root, "memory.usage_in_bytes"))
	must(t, err)
	usage, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	must(t, err)
	return total - (usage - kv(filepath.Join(root, "memory.stat"))["total_inactive_file"])
}

func guaranteedPod(name string) *v1.Pod {
	p := busyboxPod(name, sleeper)
	rl := v1.ResourceList{v1.ResourceCPU: resource.MustParse("50m"), v1.ResourceMemory: resource.MustParse("64Mi")}
	p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: rl, Limits: rl}
	return p
}

func evicted(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed && p.Status.Reason == "Evicted" }

// Memory pressure, for real: evictionHard memory.available is set 3 GiB
// under what the machine has available now, and a BestEffort pod holds
// 5.3 GiB (dd blocks it cannot write out). MemoryPressure goes True,
// that pod is evicted with upstream's message while a Guaranteed pod runs
// on, a new BestEffort pod is refused while the condition lasts, and the
// condition clears after the transition period.
func TestMemoryPressureEviction(t *testing.T) {
	cn := newClusterNode(t)
	// 3 GiB of margin: other work on a shared machine (compiles) moves
	// the available memory by a GiB or more.
	threshold := memoryAvailable(t) - 3<<30
	cn.appendConfig(fmt.Sprintf(`evictionHard:
  memory.available: "%dMi"
evictionPressureTransitionPeriod: 60s
`, threshold>>20))
	cn.start()
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	cn.waitCondition(t, v1.NodeMemoryPressure, v1.ConditionFalse, 30*time.Second)

	cn.createPod(t, guaranteedPod("steady"))
	cn.waitPod(t, cn.ns, "steady", 60*time.Second, "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	// Each dd reads one 1800 MiB block into memory and then blocks writing
	// it to a pipe nobody reads: the memory stays until the pod is killed.
	hold := "dd if=/dev/zero bs=1800M count=1 | sleep 3600"
	cn.createPod(t, busyboxPod("hog", fmt.Sprintf("(%s) & (%s) & (%s) & wait", hold, hold, hold)))

	cn.waitCondition(t, v1.NodeMemoryPressure, v1.ConditionTrue, 90*time.Second)
	got := cn.waitPod(t, cn.ns, "hog", 90*time.Second, "evicted", evicted)
	for _, want := range []string{"The node was low on resource: memory. Threshold quantity: ", ", available: ",
		"Container main was using ", ", request is 0, has larger consumption of memory. "} {
		if !strings.Contains(got.Status.Message, want) {
			t.Errorf("eviction message %q lacks %q", got.Status.Message, want)
		}
	}
	cn.waitEvent(t, "Evicted", "The node was low on resource: memory.")

	// Refused while the pressure lasts (the transition period runs on
	// after the memory is back).
	if cn.nodeCondition(t, v1.NodeMemoryPressure) != v1.ConditionTrue {
		t.Fatal("MemoryPressure cleared before the transition period was over")
	}
	cn.createPod(t, busyboxPod("late", sleeper))
	late := cn.waitPod(t, cn.ns, "late", 30*time.Second, "refused", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if late.Status.Reason != "Evicted" || !strings.Contains(late.Status.Message, "The node had condition: [MemoryPressure]") {
		t.Errorf("refused pod: reason %q message %q", late.Status.Reason, late.Status.Message)
	}
	if p := cn.getPod(t, "steady"); p.Status.Phase != v1.PodRunning {
		t.Errorf("the Guaranteed pod is %s (%s: %s)", p.Status.Phase, p.Status.Reason, p.Status.Message)
	}
	cn.waitCondition(t, v1.NodeMemoryPressure, v1.ConditionFalse, 120*time.Second)
	cn.createPod(t, busyboxPod("after", sleeper))
	cn.waitPod(t, cn.ns, "after", 60*time.Second, "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
}
