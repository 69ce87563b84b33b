//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

const mib = int64(1) << 20

// writerPod writes size MiB of zeros into its writable layer, then sleeps.
func writerPod(name string, mib int) *v1.Pod {
	return busyboxPod(name, fmt.Sprintf("dd if=/dev/zero of=/tmp/fill bs=1M count=%d && echo written && %s", mib, sleeper))
}

// evictedAt is when the kubelet marked the pod disrupted.
func evictedAt(p *v1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.DisruptionTarget {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// checkDiskPressureCondition checks the Node's DiskPressure condition
// against upstream's reason and message.
func (cn *clusterNode) checkDiskPressureCondition(t *testing.T) {
	t.Helper()
	for _, c := range cn.getNode(t).Status.Conditions {
		if c.Type == v1.NodeDiskPressure && c.Status == v1.ConditionTrue &&
			(c.Reason != "KubeletHasDiskPressure" || c.Message != "kubelet has disk pressure") {
			t.Errorf("DiskPressure reason %q message %q, want upstream's KubeletHasDiskPressure, \"kubelet has disk pressure\"", c.Reason, c.Message)
		}
	}
}

// Disk pressure, for real, on a 1 GiB filesystem of the test's own
// holding containerd's root, Skiff's root and the pod logs (nodefs and
// imagefs). evictionHard nodefs.available is set 400 MiB under what is
// available at the start, with a minimum reclaim of 300 MiB. A pod writes
// 300 MiB into its writable layer (no pressure yet), then another one
// 200 MiB: DiskPressure goes True; node-level reclaim removes an unused image
// and a finished pod's dead container before any pod is evicted; then
// the bigger writer is evicted, and since reclaiming its writable layer
// leaves the node above the threshold but short of the minimum reclaim,
// the second writer goes too; a pod within its ephemeral-storage request
// stays, and the pressure ends after the transition period.
func TestDiskPressureEviction(t *testing.T) {
	dn := newDiskNode(t, 1024)
	r := testRegistryFor(t)
	ballast := sizedImage(t, r, "e2e-ballast", 16)
	dn.pull(t, ballast)
	_, start := dn.fs(t)
	threshold := start - 400*mib
	dn.appendConfig(fmt.Sprintf(`evictionHard:
  nodefs.available: "%dMi"
evictionMinimumReclaim:
  nodefs.available: "300Mi"
evictionPressureTransitionPeriod: 30s
imageMinimumGCAge: 5s
volumeStatsAggPeriod: 10s
`, threshold/mib))
	dn.start()
	dn.waitNodeReady(t, v1.ConditionTrue, 90*time.Second)
	dn.waitCondition(t, v1.NodeDiskPressure, v1.ConditionFalse, 60*time.Second)

	done := busyboxPod("done", "true")
	done.Spec.RestartPolicy = v1.RestartPolicyNever
	done = dn.createPod(t, done)
	dn.waitPod(t, dn.ns, "done", 90*time.Second, "succeeded", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded })
	quiet := busyboxPod("quiet", sleeper)
	quiet.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("100Mi")}
	dn.createPod(t, quiet)
	dn.createPod(t, writerPod("big", 300))
	waitFor(t, 3*time.Minute, "big written", func() (bool, error) { return strings.Contains(dn.output(t, "big"), "written"), nil })
	// 300 MiB written, 100 MiB short of the threshold: no pressure, and
	// what node-level reclaim will remove is still there.
	if c := dn.nodeCondition(t, v1.NodeDiskPressure); c != v1.ConditionFalse {
		t.Fatalf("DiskPressure is %q before the threshold is crossed", c)
	}
	if len(dn.containersOf(t, string(done.UID))) == 0 || !dn.hasImage(t, ballast) {
		t.Fatal("the finished pod's dead container or the unused image is gone before any pressure")
	}

	// containerd measures writable layers every 10 s, and Skiff walks the
	// logs every volumeStatsAggPeriod: the second writer waits 30 s before
	// it writes, so that the ranking and the message have both pods'
	// stats, big's 300 MiB measured, when the pressure begins.
	dn.createPod(t, busyboxPod("small", "sleep 30 && dd if=/dev/zero of=/tmp/fill bs=1M count=200 && echo written && "+sleeper))
	dn.waitCondition(t, v1.NodeDiskPressure, v1.ConditionTrue, 180*time.Second)
	dn.checkDiskPressureCondition(t)
	big := dn.waitPod(t, dn.ns, "big", 180*time.Second, "evicted", evicted)
	// Node-level reclaim ran before the first eviction; the image the pods
	// use and the sandbox image stay.
	if dn.hasImage(t, ballast) {
		t.Error("the unused image is still there after a pod was evicted for disk pressure")
	}
	for _, img := range []string{busybox, dn.sandbox} {
		if !dn.hasImage(t, img) {
			t.Errorf("node-level reclaim removed %s", img)
		}
	}
	if n := len(dn.containersOf(t, string(done.UID))); n != 0 {
		t.Errorf("the finished pod still has %d dead containers after a pod was evicted", n)
	}
	for _, want := range []string{"The node was low on resource: ephemeral-storage. Threshold quantity: ", ", available: ",
		"Container main was using "} {
		if !strings.Contains(big.Status.Message, want) {
			t.Errorf("eviction message %q lacks %q", big.Status.Message, want)
		}
	}
	dn.waitEvent(t, "Evicted", "The node was low on resource: ephemeral-storage.")
	small := dn.waitPod(t, dn.ns, "small", 180*time.Second, "evicted for the minimum reclaim", evicted)
	if evictedAt(small).Before(evictedAt(big)) {
		t.Errorf("small evicted at %v, before big at %v", evictedAt(small), evictedAt(big))
	}
	dn.waitCondition(t, v1.NodeDiskPressure, v1.ConditionFalse, 180*time.Second)
	if p := dn.getPod(t, "quiet"); p.Status.Phase != v1.PodRunning {
		t.Errorf("the pod within its request is %s (%s: %s)", p.Status.Phase, p.Status.Reason, p.Status.Message)
	}
	if _, available := dn.fs(t); available < threshold+300*mib {
		t.Errorf("%d MiB available after the evictions, short of the threshold plus the minimum reclaim (%d MiB)",
			available/mib, (threshold+300*mib)/mib)
	}
}

// A soft nodefs.available threshold waits out its grace period: the
// writer keeps running while DiskPressure is True, then is evicted, and
// the pressure ends once its writable layer is reclaimed. On a 1 GiB
// filesystem of the test's own, the threshold 200 MiB under what is
// available at the start, and a pod writing 300 MiB.
func TestDiskPressureSoftThreshold(t *testing.T) {
	dn := newDiskNode(t, 1024)
	_, start := dn.fs(t)
	const grace = 60 * time.Second
	dn.appendConfig(fmt.Sprintf(`evictionHard: {}
evictionSoft:
  nodefs.available: "%dMi"
evictionSoftGracePeriod:
  nodefs.available: %s
evictionMaxPodGracePeriod: 2
evictionPressureTransitionPeriod: 30s
`, (start-200*mib)/mib, grace))
	dn.start()
	dn.waitNodeReady(t, v1.ConditionTrue, 90*time.Second)
	dn.createPod(t, writerPod("writer", 300))
	dn.waitCondition(t, v1.NodeDiskPressure, v1.ConditionTrue, 180*time.Second)
	seen := time.Now()
	dn.checkDiskPressureCondition(t)
	// Half the grace period later the pod still runs.
	time.Sleep(grace / 2)
	if p := dn.getPod(t, "writer"); p.Status.Phase != v1.PodRunning {
		t.Fatalf("writer is %s (%s) %v after DiskPressure, within the grace period", p.Status.Phase, p.Status.Reason, time.Since(seen))
	}
	got := dn.waitPod(t, dn.ns, "writer", 180*time.Second, "evicted", evicted)
	if !strings.Contains(got.Status.Message, "The node was low on resource: ephemeral-storage.") {
		t.Errorf("message %q", got.Status.Message)
	}
	// The condition shows up to a node status period (10 s) after the
	// threshold is first met, and the eviction a grace period after that
	// (within an eviction period, 10 s): without the grace period it
	// would come within about 10 s of DiskPressure.
	if at := evictedAt(got); at.Before(seen.Add(grace - 20*time.Second)) {
		t.Errorf("evicted at %v, %v after DiskPressure was seen: before the %v grace period", at, at.Sub(seen), grace)
	}
	dn.waitCondition(t, v1.NodeDiskPressure, v1.ConditionFalse, 180*time.Second)
}

// PID pressure, for real: pid.available is set 1500 under the PIDs the
// node has left (other work on the machine moves that by hundreds); a
// pod forks 3000 sleeping processes and is evicted.
func TestPIDPressureEviction(t *testing.T) {
	cn := newClusterNode(t)
	readInt := func(path string) int64 {
		b, err := os.ReadFile(path)
		must(t, err)
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		must(t, err)
		return v
	}
	b, err := os.ReadFile("/proc/loadavg")
	must(t, err)
	_, procs, _ := strings.Cut(strings.Fields(string(b))[3], "/")
	running, err := strconv.ParseInt(procs, 10, 64)
	must(t, err)
	threshold := readInt("/proc/sys/kernel/pid_max") - running - 1500
	cn.appendConfig(fmt.Sprintf(`evictionHard:
  pid.available: "%d"
evictionPressureTransitionPeriod: 30s
`, threshold))
	cn.start()
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	cn.waitCondition(t, v1.NodePIDPressure, v1.ConditionFalse, 30*time.Second)
	cn.createPod(t, guaranteedPod("steady"))
	cn.waitPod(t, cn.ns, "steady", 60*time.Second, "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	cn.createPod(t, busyboxPod("forker", "i=0; while [ $i -lt 3000 ]; do sleep 3600 & i=$((i+1)); done; "+sleeper))

	cn.waitCondition(t, v1.NodePIDPressure, v1.ConditionTrue, 120*time.Second)
	got := cn.waitPod(t, cn.ns, "forker", 120*time.Second, "evicted", evicted)
	if !strings.Contains(got.Status.Message, "The node was low on resource: pids. Threshold quantity: ") {
		t.Errorf("message %q", got.Status.Message)
	}
	if p := cn.getPod(t, "steady"); p.Status.Phase != v1.PodRunning {
		t.Errorf("the other pod is %s (%s)", p.Status.Phase, p.Status.Reason)
	}
	cn.waitCondition(t, v1.NodePIDPressure, v1.ConditionFalse, 120*time.Second)
}

// A container writing past its ephemeral-storage limit into its writable
// layer is evicted with upstream's message; its sibling is not the one
// named, and a pod within its limits runs on.
func TestEphemeralStorageLimitEviction(t *testing.T) {
	cn := newClusterNode(t)
	cn.start()
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	limit := func(c *v1.Container, q string) {
		c.Resources.Limits = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse(q)}
	}
	p := writerPod("over", 100)
	limit(&p.Spec.Containers[0], "50Mi")
	p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "idle", Image: busybox,
		ImagePullPolicy: v1.PullNever, Command: []string{"sh", "-c", sleeper}})
	limit(&p.Spec.Containers[1], "1Gi")
	cn.createPod(t, p)
	within := writerPod("within", 20)
	limit(&within.Spec.Containers[0], "50Mi")
	cn.createPod(t, within)

	got := cn.waitPod(t, cn.ns, "over", 120*time.Second, "evicted", evicted)
	if want := `Container main exceeded its local ephemeral storage limit "50Mi". `; got.Status.Message != want {
		t.Errorf("message %q, want %q", got.Status.Message, want)
	}
	cn.waitEvent(t, "Evicted", "exceeded its local ephemeral storage limit")
	if p := cn.getPod(t, "within"); p.Status.Phase != v1.PodRunning {
		t.Errorf("the pod within its limit is %s (%s)", p.Status.Phase, p.Status.Reason)
	}
}
