//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"
	"k8s.io/klog/v2"
)

const gib = int64(1) << 30

// fsAvailable is what statfs says is available to unprivileged users on
// the filesystem of path: nodefs.available as upstream reads it.
func fsAvailable(t *testing.T, path string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	must(t, syscall.Statfs(path, &st))
	return int64(st.Bavail) * int64(st.Bsize)
}

// restoreImages imports again the dev images that node-level reclaim
// removes as unused (hack/containerd.sh only builds missing ones).
func restoreImages(t *testing.T) {
	if out, err := exec.Command("../../hack/containerd.sh", "start").CombinedOutput(); err != nil {
		t.Errorf("restore the dev images: %v\n%s", err, out)
	}
}

// imagePresent asks the runtime whether it has the image.
func imagePresent(t *testing.T, name string) bool {
	t.Helper()
	logger := klog.Background()
	is, err := remote.NewRemoteImageService(criEndpoint, 30*time.Second, nil, &logger)
	must(t, err)
	st, err := is.ImageStatus(context.Background(), &runtimeapi.ImageSpec{Image: name}, false)
	must(t, err)
	return st.GetImage() != nil
}

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

// Disk pressure, for real: two pods write 6 GiB and 4 GiB into their
// writable layers; then Skiff restarts with evictionHard nodefs.available
// 4 GiB above what the filesystem has left and a minimum reclaim of 4
// GiB. DiskPressure goes True; node-level reclaim removes an
// unused image and a finished pod's container before any pod is evicted;
// then the bigger writer is evicted, and since its removal leaves the
// node above the threshold but short of the minimum reclaim, the second
// writer goes too; a pod within its ephemeral-storage request stays.
func TestDiskPressureEviction(t *testing.T) {
	t.Skip("known defect: a Skiff restarted under disk pressure refuses the pods it already runs (pressure admission on adoption), so this test's restart fails its writers before eviction; unskip when adopted pods bypass pressure admission")
	cn := newClusterNode(t)
	t.Cleanup(func() { restoreImages(t) })
	ballast := filepath.Join(t.TempDir(), "ballast")
	out, err := exec.Command("head", "-c", "32M", "/dev/urandom").Output()
	must(t, err)
	must(t, os.WriteFile(ballast, out, 0o644))
	const ballastImage = "skiff.local/e2e-ballast:1"
	importImage(t, ballastImage, "--add", ballast+":/ballast")
	t.Cleanup(func() { removeImages(t, ballastImage) })

	cn.appendConfig("evictionPressureTransitionPeriod: 30s\nimageMinimumGCAge: 5s\nvolumeStatsAggPeriod: 10s\n")
	cn.start()
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)

	done := busyboxPod("done", "true")
	done.Spec.RestartPolicy = v1.RestartPolicyNever
	done = cn.createPod(t, done)
	cn.waitPod(t, cn.ns, "done", 60*time.Second, "succeeded", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded })
	if len(containersOf(t, string(done.UID))) == 0 {
		t.Fatal("the finished pod has no dead container to reclaim")
	}
	quiet := busyboxPod("quiet", sleeper)
	quiet.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("100Mi")}
	cn.createPod(t, quiet)
	cn.createPod(t, writerPod("big", 6144))
	cn.createPod(t, writerPod("small", 4096))
	for _, name := range []string{"big", "small"} {
		waitFor(t, 5*time.Minute, name+" written", func() (bool, error) {
			return strings.Contains(cn.output(t, name), "written"), nil
		})
	}

	// Other work on this machine moves the free space by gigabytes, so the
	// threshold is set once the pods have written, 4 GiB above what is
	// available then, with a minimum reclaim of 4 GiB: evicting big (6
	// GiB) leaves the node 2 GiB above the threshold and 2 GiB short of
	// the minimum reclaim, evicting small (4 GiB) too 2 GiB past it.
	threshold := fsAvailable(t, filepath.Dir(cn.root)) + 4*gib
	cn.stop()
	cn.appendConfig(fmt.Sprintf(`evictionHard:
  nodefs.available: "%dMi"
evictionMinimumReclaim:
  nodefs.available: "4Gi"
`, threshold>>20))
	cn.start()
	cn.waitCondition(t, v1.NodeDiskPressure, v1.ConditionTrue, 120*time.Second)
	big := cn.waitPod(t, cn.ns, "big", 180*time.Second, "evicted", evicted)
	// Node-level reclaim ran before the first eviction.
	if imagePresent(t, ballastImage) {
		t.Error("the unused image is still there after a pod was evicted for disk pressure")
	}
	// The image the running pods use and the sandbox image stay.
	for _, img := range []string{busybox, "skiff.local/pause:3.10"} {
		if !imagePresent(t, img) {
			t.Errorf("node-level reclaim removed %s", img)
		}
	}
	if n := len(containersOf(t, string(done.UID))); n != 0 {
		t.Errorf("the finished pod still has %d dead containers after a pod was evicted", n)
	}
	for _, want := range []string{"The node was low on resource: ephemeral-storage. Threshold quantity: ", ", available: ",
		"Container main was using "} {
		if !strings.Contains(big.Status.Message, want) {
			t.Errorf("eviction message %q lacks %q", big.Status.Message, want)
		}
	}
	small := cn.waitPod(t, cn.ns, "small", 180*time.Second, "evicted for the minimum reclaim", evicted)
	if !evictedAt(big).Before(evictedAt(small)) && !evictedAt(big).Equal(evictedAt(small)) {
		t.Errorf("small evicted at %v, before big at %v", evictedAt(small), evictedAt(big))
	}
	cn.waitCondition(t, v1.NodeDiskPressure, v1.ConditionFalse, 180*time.Second)
	if p := cn.getPod(t, "quiet"); p.Status.Phase != v1.PodRunning {
		t.Errorf("the pod within its request is %s (%s: %s)", p.Status.Phase, p.Status.Reason, p.Status.Message)
	}
}

// A soft nodefs.available threshold waits out its grace period: the
// writer keeps running while DiskPressure is True, then is evicted, and
// the pressure ends once its writable layer is reclaimed.
func TestDiskPressureSoftThreshold(t *testing.T) {
	t.Skip("known defect: a Skiff restarted under disk pressure refuses the pods it already runs (pressure admission on adoption), so this test's restart fails its writers before eviction; unskip when adopted pods bypass pressure admission")
	cn := newClusterNode(t)
	t.Cleanup(func() { restoreImages(t) })
	cn.start()
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	cn.createPod(t, writerPod("writer", 4096))
	waitFor(t, 5*time.Minute, "writer written", func() (bool, error) {
		return strings.Contains(cn.output(t, "writer"), "written"), nil
	})
	// Set once the pod has written, 2 GiB above what is left then: other
	// work on this machine moves the free space by gigabytes.
	threshold := fsAvailable(t, filepath.Dir(cn.root)) + 2*gib
	const grace = 60 * time.Second
	cn.stop()
	cn.appendConfig(fmt.Sprintf(`evictionHard: {}
evictionSoft:
  nodefs.available: "%dMi"
evictionSoftGracePeriod:
  nodefs.available: %s
evictionMaxPodGracePeriod: 2
evictionPressureTransitionPeriod: 30s
`, threshold>>20, grace))
	cn.start()
	cn.waitCondition(t, v1.NodeDiskPressure, v1.ConditionTrue, 180*time.Second)
	seen := time.Now()
	// Half the grace period later the pod still runs.
	time.Sleep(grace / 2)
	if p := cn.getPod(t, "writer"); p.Status.Phase != v1.PodRunning {
		t.Fatalf("writer is %s (%s) %v after DiskPressure, within the grace period", p.Status.Phase, p.Status.Reason, time.Since(seen))
	}
	got := cn.waitPod(t, cn.ns, "writer", 180*time.Second, "evicted", evicted)
	if !strings.Contains(got.Status.Message, "The node was low on resource: ephemeral-storage.") {
		t.Errorf("message %q", got.Status.Message)
	}
	cn.waitCondition(t, v1.NodeDiskPressure, v1.ConditionFalse, 180*time.Second)
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
