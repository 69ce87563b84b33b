package stats

import (
	"testing"
	"time"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// The "pods" system container has the kubepods cgroup's working set and
// what its memory limit leaves (allocatableMemory.available); a pod's
// process count comes from its pids cgroup.
func TestPodsContainerAndPids(t *testing.T) {
	root := t.TempDir()
	cgroupV1(t, root, "/e2e/kubepods", "1", "3000000", "total_inactive_file 1000000\n")
	write(t, root, "memory/e2e/kubepods/memory.limit_in_bytes", "10000000\n")
	write(t, root, "pids/e2e/kubepods/pod1/pids.current", "37\n")
	p := New(Config{CgroupRoot: root, ProcRoot: t.TempDir(), PodsCgroup: "/e2e/kubepods"})
	c := p.podsContainer(time.Now())
	if c == nil || c.Name != statsapi.SystemContainerPods {
		t.Fatalf("pods container %+v", c)
	}
	if ws, avail := *c.Memory.WorkingSetBytes, *c.Memory.AvailableBytes; ws != 2000000 || avail != 8000000 {
		t.Errorf("working set %d, available %d; want 2000000, 8000000", ws, avail)
	}
	if n := p.host.cg.pids("/e2e/kubepods/pod1"); n == nil || *n != 37 {
		t.Errorf("pids %v", n)
	}
	// No limit (v1 says so with a huge number): no signal.
	write(t, root, "memory/e2e/kubepods/memory.limit_in_bytes", "9223372036854771712\n")
	if c := p.podsContainer(time.Now()); c != nil {
		t.Errorf("an unlimited kubepods gives %+v", c)
	}
}
