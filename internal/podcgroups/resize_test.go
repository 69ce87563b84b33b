package podcgroups

import (
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// A pod's memory usage is the cgroup's whole usage, page cache included,
// as upstream's check of a lower memory limit reads it (cAdvisor's usage),
// not the working set that leaves inactive file pages out.
func TestPodMemoryUsageCountsPageCache(t *testing.T) {
	pod := podWith("g", v1.ResourceRequirements{Requests: rl("1", "64Mi"), Limits: rl("1", "64Mi")})
	for _, c := range []struct {
		name        string
		root        string
		dir         string // the pod cgroup's memory directory below root
		usage, stat string
	}{
		{"v1", fakeV1(t), "memory/test/kubepods/podg", "memory.usage_in_bytes", "total_inactive_file 41943040\n"},
		{"v2", fakeV2(t), "test/kubepods/podg", "memory.current", "inactive_file 41943040\n"},
	} {
		dir := filepath.Join(c.root, c.dir)
		must(t, os.MkdirAll(dir, 0o755))
		must(t, os.WriteFile(filepath.Join(dir, c.usage), []byte("104857600\n"), 0o644))
		must(t, os.WriteFile(filepath.Join(dir, "memory.stat"), []byte(c.stat), 0o644))
		got, err := newManager(t, c.root).PodMemoryUsage(pod)
		if err != nil || got != 100<<20 {
			t.Errorf("%s: usage %d, %v; want 100Mi, the inactive file pages counted", c.name, got, err)
		}
	}
}
