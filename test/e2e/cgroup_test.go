//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// e2eCgroupRoot is the test nodes' cgroupRoot: their kubepods hierarchy
// lives apart from a dev Skiff's and is removed after every test.
const e2eCgroupRoot = "/skiff-e2e"

const cgroupMount = "/sys/fs/cgroup"

// cgroupDir is a cgroup's directory in the v1 hierarchy of controller, or
// in the unified hierarchy on a v2 host.
func cgroupDir(controller, name string) string {
	if _, err := os.Stat(filepath.Join(cgroupMount, "cgroup.controllers")); err == nil {
		return filepath.Join(cgroupMount, name)
	}
	return filepath.Join(cgroupMount, controller, name)
}

func cgroupFile(t *testing.T, controller, name, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cgroupDir(controller, name), file))
	if err != nil {
		t.Errorf("read cgroup file: %v", err)
		return ""
	}
	return strings.TrimSpace(string(b))
}

// removeE2ECgroups removes the cgroups the test's Skiff made, deepest
// first, in every hierarchy.
func removeE2ECgroups(t *testing.T) { removeCgroups(t, e2eCgroupRoot) }

// removeCgroups removes the cgroups under root, deepest first, in every
// hierarchy.
func removeCgroups(t *testing.T, root string) {
	dirs, _ := filepath.Glob(filepath.Join(cgroupMount, "*", root))
	dirs = append(dirs, filepath.Join(cgroupMount, root))
	for _, d := range dirs {
		var all []string
		_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				all = append(all, p)
			}
			return nil
		})
		for i := len(all) - 1; i >= 0; i-- {
			if err := syscall.Rmdir(all[i]); err != nil && !os.IsNotExist(err) {
				t.Logf("cgroup %s left: %v", all[i], err)
			}
		}
	}
}

// The pod cgroup carries the CPU quota and memory
// limit of the spec and its containers sit below it; a container that
// allocates past its 64 Mi limit is OOMKilled and reported so; pod cgroups
// go with their pods, and orphaned ones (not of running pods) are removed.
func TestPodCgroupsAndOOMKill(t *testing.T) {
	cn := sharedNode(t)
	kubepods := filepath.Join(e2eCgroupRoot, "kubepods")
	// A pod cgroup left from a pod removed while no Skiff ran.
	orphan := filepath.Join(kubepods, "besteffort", "pod0rphan-0000")
	for _, c := range []string{"cpu", "memory"} {
		must(t, os.MkdirAll(cgroupDir(c, orphan), 0o755))
	}
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)

	limited := busyboxPod("limited", sleeper)
	limited.Spec.Containers[0].Resources = v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("64Mi")},
	}
	guaranteed := busyboxPod("guaranteed", sleeper)
	guaranteed.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("32Mi")}
	// Doubling a shell string passes 64 Mi within a few rounds.
	hog := busyboxPod("hog", "x=0123456789abcdef; while true; do x=$x$x; done")
	hog.Spec.RestartPolicy = v1.RestartPolicyNever
	hog.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")}
	for _, p := range []*v1.Pod{limited, guaranteed, hog} {
		cn.createPod(t, p)
	}

	lp := cn.waitPod(t, cn.ns, "limited", 60*time.Second, "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	if lp.Status.QOSClass != v1.PodQOSBurstable {
		t.Errorf("QoS %s", lp.Status.QOSClass)
	}
	podCg := filepath.Join(kubepods, "burstable", "pod"+string(lp.UID))
	if q, p := cgroupFile(t, "cpu", podCg, "cpu.cfs_quota_us"), cgroupFile(t, "cpu", podCg, "cpu.cfs_period_us"); q != "50000" || p != "100000" {
		t.Errorf("pod cgroup CFS quota %s period %s, want 50000/100000 (500m)", q, p)
	}
	if got := cgroupFile(t, "cpu", podCg, "cpu.shares"); got != "256" {
		t.Errorf("pod cgroup cpu.shares %s, want 256 (250m)", got)
	}
	if got := cgroupFile(t, "memory", podCg, "memory.limit_in_bytes"); got != "67108864" {
		t.Errorf("pod cgroup memory limit %s, want 64Mi", got)
	}
	id := strings.TrimPrefix(lp.Status.ContainerStatuses[0].ContainerID, "containerd://")
	if got := cgroupFile(t, "memory", filepath.Join(podCg, id), "memory.limit_in_bytes"); got != "67108864" {
		t.Errorf("container memory limit %s, want 64Mi", got)
	}
	if got := cgroupFile(t, "cpu", filepath.Join(podCg, id), "cpu.cfs_quota_us"); got != "50000" {
		t.Errorf("container CFS quota %s", got)
	}

	gp := cn.waitPod(t, cn.ns, "guaranteed", 60*time.Second, "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	gCg := filepath.Join(kubepods, "pod"+string(gp.UID))
	if q, m := cgroupFile(t, "cpu", gCg, "cpu.cfs_quota_us"), cgroupFile(t, "memory", gCg, "memory.limit_in_bytes"); q != "100000" || m != "33554432" {
		t.Errorf("guaranteed pod cgroup quota %s memory %s", q, m)
	}

	hp := cn.waitPod(t, cn.ns, "hog", 90*time.Second, "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	term := hp.Status.ContainerStatuses[0].State.Terminated
	if term == nil || term.Reason != "OOMKilled" || term.ExitCode != 137 {
		t.Errorf("hog container state %+v, want OOMKilled with exit code 137", hp.Status.ContainerStatuses[0].State)
	}

	waitFor(t, 20*time.Second, "orphaned pod cgroup removed", func() (bool, error) {
		_, err := os.Stat(cgroupDir("memory", orphan))
		return os.IsNotExist(err), nil
	})
	if _, err := os.Stat(cgroupDir("memory", podCg)); err != nil {
		t.Errorf("a running pod's cgroup was touched: %v", err)
	}

	must(t, cn.admin.CoreV1().Pods(cn.ns).Delete(cn.ctx(), "limited", metav1.DeleteOptions{}))
	waitFor(t, 60*time.Second, "pod cgroup removed with its pod", func() (bool, error) {
		for _, c := range []string{"cpu", "memory", "pids"} {
			if _, err := os.Stat(cgroupDir(c, podCg)); !os.IsNotExist(err) {
				return false, nil
			}
		}
		return true, nil
	})
}
