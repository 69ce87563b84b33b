package podcgroups

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func podWith(uid string, res ...v1.ResourceRequirements) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID(uid)}}
	for i, r := range res {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: string(rune('a' + i)), Resources: r})
	}
	return p
}

func rl(cpu, mem string) v1.ResourceList {
	l := v1.ResourceList{}
	if cpu != "" {
		l[v1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		l[v1.ResourceMemory] = resource.MustParse(mem)
	}
	return l
}

// fakeV1 lays out a cgroup v1 root: one directory per hierarchy.
func fakeV1(t *testing.T) string {
	root := t.TempDir()
	for _, c := range []string{"cpu", "cpuacct", "cpuset", "memory", "pids", "systemd", "unified"} {
		must(t, os.MkdirAll(filepath.Join(root, c), 0o755))
	}
	must(t, os.WriteFile(filepath.Join(root, "cpuset", "cpuset.cpus"), []byte("0-1\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "cpuset", "cpuset.mems"), []byte("0\n"), 0o644))
	return root
}

func fakeV2(t *testing.T) string {
	root := t.TempDir()
	must(t, os.WriteFile(filepath.Join(root, "cgroup.controllers"), []byte("cpuset cpu io memory pids rdma\n"), 0o644))
	return root
}

func newManager(t *testing.T, root string) *Manager {
	t.Helper()
	m, err := New(Config{
		Root: root, CgroupRoot: "/test", PerQOS: true, Driver: "cgroupfs", EnforcePods: true,
		Capacity: rl("2", "4Gi"), Reserved: rl("500m", "1Gi"),
		CPUCFSQuota: true, CPUCFSQuotaPeriod: 100 * time.Millisecond,
		Rmdir: os.RemoveAll, // plain directories, not cgroupfs
	})
	must(t, err)
	// Nested cgroups need their interface files in a fake root for
	// controllers to be read back; mkdir does not make them.
	return m
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return strings.TrimSpace(string(b))
}

func TestV1Hierarchy(t *testing.T) {
	root := fakeV1(t)
	m := newManager(t, root)
	if m.Version() != 1 {
		t.Fatalf("version %d", m.Version())
	}
	must(t, m.Start())
	kp := "test/kubepods"
	if got := read(t, filepath.Join(root, "cpu", kp, "cpu.shares")); got != "1536" {
		t.Errorf("kubepods shares %s, want 1536 (1.5 CPUs allocatable)", got)
	}
	if got := read(t, filepath.Join(root, "memory", kp, "memory.limit_in_bytes")); got != "3221225472" {
		t.Errorf("kubepods memory %s, want 3Gi", got)
	}
	if got := read(t, filepath.Join(root, "cpu", kp, "besteffort", "cpu.shares")); got != "2" {
		t.Errorf("besteffort shares %s", got)
	}
	if got := read(t, filepath.Join(root, "cpuset", kp, "burstable", "cpuset.cpus")); got != "0-1" {
		t.Errorf("cpuset not initialized: %q", got)
	}
	if _, err := os.Stat(filepath.Join(root, "unified", kp)); err == nil {
		t.Error("cgroups made in the hybrid unified mount")
	}

	guaranteed := podWith("g", v1.ResourceRequirements{Requests: rl("250m", "64Mi"), Limits: rl("250m", "64Mi")})
	burstable := podWith("b",
		v1.ResourceRequirements{Requests: rl("100m", ""), Limits: rl("500m", "128Mi")},
		v1.ResourceRequirements{Requests: rl("200m", "")}) // no limits: no quota, no memory limit
	besteffort := podWith("e", v1.ResourceRequirements{})
	for _, p := range []*v1.Pod{guaranteed, burstable, besteffort} {
		must(t, m.EnsurePod(p))
	}
	if got := m.PodCgroupParent(guaranteed); got != "/test/kubepods/podg" {
		t.Errorf("guaranteed parent %s", got)
	}
	g := filepath.Join(root, "cpu", kp, "podg")
	if read(t, filepath.Join(g, "cpu.shares")) != "256" || read(t, filepath.Join(g, "cpu.cfs_quota_us")) != "25000" ||
		read(t, filepath.Join(g, "cpu.cfs_period_us")) != "100000" {
		t.Errorf("guaranteed cpu: shares %s quota %s", read(t, filepath.Join(g, "cpu.shares")), read(t, filepath.Join(g, "cpu.cfs_quota_us")))
	}
	if got := read(t, filepath.Join(root, "memory", kp, "podg", "memory.limit_in_bytes")); got != "67108864" {
		t.Errorf("guaranteed memory %s", got)
	}
	b := filepath.Join(root, "cpu", kp, "burstable", "podb")
	if read(t, filepath.Join(b, "cpu.shares")) != "307" {
		t.Errorf("burstable shares %s", read(t, filepath.Join(b, "cpu.shares")))
	}
	for _, f := range []string{filepath.Join(b, "cpu.cfs_quota_us"), filepath.Join(root, "memory", kp, "burstable", "podb", "memory.limit_in_bytes")} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("%s set although a container has no limit", f)
		}
	}
	if got := read(t, filepath.Join(root, "cpu", kp, "burstable", "cpu.shares")); got != "307" {
		t.Errorf("burstable QoS shares %s, want the sum of its pods' requests", got)
	}
	if got := read(t, filepath.Join(root, "cpu", kp, "besteffort", "pode", "cpu.shares")); got != "2" {
		t.Errorf("besteffort pod shares %s", got)
	}

	uids, err := m.PodUIDs()
	must(t, err)
	sort.Slice(uids, func(i, j int) bool { return uids[i] < uids[j] })
	if !reflect.DeepEqual(uids, []types.UID{"b", "e", "g"}) {
		t.Errorf("pod cgroups %v", uids)
	}
	// A container cgroup the runtime made under the pod goes with it.
	must(t, os.MkdirAll(filepath.Join(root, "systemd", kp, "burstable", "podb", "ctr"), 0o755))
	must(t, m.RemovePod("b"))
	for _, h := range []string{"cpu", "cpuacct", "cpuset", "memory", "pids", "systemd"} {
		if _, err := os.Stat(filepath.Join(root, h, kp, "burstable", "podb")); !os.IsNotExist(err) {
			t.Errorf("%s: pod cgroup left: %v", h, err)
		}
	}
	if got := read(t, filepath.Join(root, "cpu", kp, "burstable", "cpu.shares")); got != "2" {
		t.Errorf("burstable QoS shares %s after its pod left", got)
	}
	must(t, m.RemovePod("b")) // removing twice is fine
}

func TestV2Hierarchy(t *testing.T) {
	root := fakeV2(t)
	m := newManager(t, root)
	if m.Version() != 2 {
		t.Fatalf("version %d", m.Version())
	}
	// A fake unified fs has no interface files in new directories: give
	// each level the controllers the kernel would list.
	for _, d := range []string{"test", "test/kubepods", "test/kubepods/burstable", "test/kubepods/besteffort"} {
		must(t, os.MkdirAll(filepath.Join(root, d), 0o755))
		must(t, os.WriteFile(filepath.Join(root, d, "cgroup.controllers"), []byte("cpu memory pids\n"), 0o644))
	}
	must(t, m.Start())
	if got := read(t, filepath.Join(root, "cgroup.subtree_control")); got != "+cpuset +cpu +io +memory +pids" {
		t.Errorf("root subtree_control %q", got)
	}
	if got := read(t, filepath.Join(root, "test/kubepods/cgroup.subtree_control")); got != "+cpu +memory +pids" {
		t.Errorf("kubepods subtree_control %q", got)
	}
	if got := read(t, filepath.Join(root, "test/kubepods/memory.max")); got != "3221225472" {
		t.Errorf("kubepods memory.max %s", got)
	}
	if got := read(t, filepath.Join(root, "test/kubepods/besteffort/cpu.weight")); got != "1" {
		t.Errorf("besteffort weight %s", got)
	}
	p := podWith("g", v1.ResourceRequirements{Requests: rl("1", "64Mi"), Limits: rl("1", "64Mi")})
	must(t, m.EnsurePod(p))
	dir := filepath.Join(root, "test/kubepods/podg")
	if read(t, filepath.Join(dir, "cpu.max")) != "100000 100000" || read(t, filepath.Join(dir, "memory.max")) != "67108864" ||
		read(t, filepath.Join(dir, "cpu.weight")) != "39" {
		t.Errorf("pod cgroup: cpu.max %q memory.max %q weight %q", read(t, filepath.Join(dir, "cpu.max")),
			read(t, filepath.Join(dir, "memory.max")), read(t, filepath.Join(dir, "cpu.weight")))
	}
	must(t, m.RemovePod("g"))
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("pod cgroup left: %v", err)
	}
}

func TestConfigRejected(t *testing.T) {
	if _, err := New(Config{Root: fakeV1(t), Driver: "kvm"}); err == nil || !strings.Contains(err.Error(), `cgroupDriver "kvm" is not supported`) {
		t.Errorf("unknown driver: %v", err)
	}
	if _, err := os.Stat("/run/systemd/system"); os.IsNotExist(err) {
		// This host runs no systemd: the driver is refused, naming why.
		if _, err := New(Config{Root: fakeV1(t), Driver: "systemd"}); err == nil || !strings.Contains(err.Error(), "systemd is not running") {
			t.Errorf("systemd driver without systemd: %v", err)
		}
	}
	for _, root := range []string{"/kubelet.slice", "/my_root"} {
		if _, err := New(Config{Root: fakeV1(t), Driver: "systemd", CgroupRoot: root}); err == nil || !strings.Contains(err.Error(), "cgroupRoot") {
			t.Errorf("systemd driver with cgroupRoot %s: %v", root, err)
		}
	}
	if _, err := New(Config{Root: t.TempDir(), Driver: "cgroupfs"}); err == nil {
		t.Error("a root without cpu and memory hierarchies was accepted")
	}
	m, err := New(Config{Root: fakeV1(t), CgroupRoot: "/", PerQOS: false})
	must(t, err)
	if got := m.PodCgroupParent(podWith("x")); got != "" {
		t.Errorf("without per-QoS cgroups the parent is %q", got)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
