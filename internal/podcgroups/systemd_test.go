package podcgroups

import (
	"reflect"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The names upstream's ToSystemd gives (pkg/kubelet/cm/cgroup_manager_linux.go).
func TestSystemdNames(t *testing.T) {
	for _, tc := range []struct {
		name cgroupName
		want string
	}{
		{cgroupName{}, "/"},
		{cgroupName{"kubepods"}, "/kubepods.slice"},
		{cgroupName{"kubepods", "burstable"}, "/kubepods.slice/kubepods-burstable.slice"},
		{cgroupName{"kubepods", "burstable", "pod1234-abcd-5678-efgh"},
			"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_abcd_5678_efgh.slice"},
		{cgroupName{"kubelet", "kubepods", "pod1"}, "/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-pod1.slice"},
	} {
		got, err := tc.name.systemd()
		if err != nil || got != tc.want {
			t.Errorf("%v: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	if got := parseCgroupfs("/"); len(got) != 0 {
		t.Errorf("parse /: %q", got)
	}
	if got := parseCgroupfs("/kubelet/x/"); !slices.Equal(got, cgroupName{"kubelet", "x"}) {
		t.Errorf("parse /kubelet/x/: %q", got)
	}
}

func TestSystemdUnit(t *testing.T) {
	for name, want := range map[string][2]string{
		"/kubepods.slice": {"-.slice", "kubepods.slice"},
		"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1_2.slice": {"kubepods-burstable.slice", "kubepods-burstable-pod1_2.slice"},
	} {
		if p, s := unit(name); p != want[0] || s != want[1] {
			t.Errorf("unit(%s) = %s in %s, want %s in %s", name, s, p, want[1], want[0])
		}
	}
}

func TestPodUIDFromDir(t *testing.T) {
	for _, tc := range []struct {
		driver, dir string
		uid         types.UID
		ok          bool
	}{
		{DriverSystemd, "kubepods-burstable-pod1234_abcd.slice", "1234-abcd", true},
		{DriverSystemd, "kubepods-pod1234_abcd.slice", "1234-abcd", true},
		{DriverSystemd, "kubepods-burstable.slice", "", false},
		{DriverSystemd, "cri-containerd-abc.scope", "", false},
		{DriverCgroupfs, "pod1234-abcd", "1234-abcd", true},
		{DriverCgroupfs, "burstable", "", false},
	} {
		uid, ok := podUIDFromDir(tc.driver, tc.dir)
		if uid != tc.uid || ok != tc.ok {
			t.Errorf("%s %s: %q %v", tc.driver, tc.dir, uid, ok)
		}
	}
}

// recordFS records what the Manager asks a driver to do.
type recordFS struct {
	created, removed []string
	applied          map[string]Limits
	kids             map[string][]string
}

func (r *recordFS) version() int             { return 1 }
func (r *recordFS) create(name string) error { r.created = append(r.created, name); return nil }
func (r *recordFS) apply(name string, l Limits) error {
	r.applied[name] = l
	return nil
}
func (r *recordFS) remove(name string) error { r.removed = append(r.removed, name); return nil }
func (r *recordFS) children(name string) ([]string, error) {
	return r.kids[name], nil
}
func (r *recordFS) hasFile(_, _, _ string) bool  { return false }
func (r *recordFS) memoryDir(name string) string { return "/nonexistent-skiff-test" + name }

// With the systemd driver the Manager names every cgroup as a slice: the
// QoS slices at start, the pod slice it creates and hands to CRI, and the
// pod UIDs it reads back from the slices found.
func TestSystemdLayout(t *testing.T) {
	fs := &recordFS{applied: map[string]Limits{}, kids: map[string][]string{
		"/kubepods.slice/kubepods-besteffort.slice": {"kubepods-besteffort-podaa_bb.slice"},
		"/kubepods.slice": {"kubepods-burstable.slice", "kubepods-besteffort.slice", "kubepods-podcc_dd.slice"},
	}}
	m := withFS(Config{Root: "/sys/fs/cgroup", CgroupRoot: "/", PerQOS: true, Driver: DriverSystemd,
		Capacity: rl("2", "4Gi"), CPUCFSQuota: true, CPUCFSQuotaPeriod: 100 * time.Millisecond}, fs, cgroupName{})
	must(t, m.Start())
	wantQoS := []string{"/kubepods.slice", "/kubepods.slice/kubepods-burstable.slice", "/kubepods.slice/kubepods-besteffort.slice"}
	if !reflect.DeepEqual(fs.created, wantQoS) {
		t.Errorf("QoS slices %q, want %q", fs.created, wantQoS)
	}
	pod := podWith("0a1b-2c3d", v1.ResourceRequirements{Requests: rl("100m", ""), Limits: rl("500m", "")})
	must(t, m.EnsurePod(pod))
	want := "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0a1b_2c3d.slice"
	if got := m.PodCgroupParent(pod); got != want {
		t.Errorf("cgroup parent %q, want %q", got, want)
	}
	if l, ok := fs.applied[want]; !ok || l.CPUQuota == nil || *l.CPUQuota != 50000 {
		t.Errorf("pod slice limits %+v (%v), want a 50000 CFS quota", l, ok)
	}
	uids, err := m.PodUIDs()
	must(t, err)
	if !slices.Equal(uids, []types.UID{"cc-dd", "aa-bb"}) {
		t.Errorf("pod UIDs %q", uids)
	}
	must(t, m.RemovePod("0a1b-2c3d"))
	if !slices.Contains(fs.removed, want) {
		t.Errorf("removed %q, want %s among them", fs.removed, want)
	}

	under := withFS(Config{CgroupRoot: "/kubelet", PerQOS: true, Driver: DriverSystemd}, fs, cgroupName{"kubelet"})
	if got := under.PodCgroupParent(podWith("x")); got != "/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-podx.slice" {
		t.Errorf("under cgroupRoot /kubelet: %q", got)
	}
	flat := withFS(Config{CgroupRoot: "/kubelet", Driver: DriverSystemd}, fs, cgroupName{"kubelet"})
	if got := flat.PodCgroupParent(podWith("x")); got != "/kubelet.slice" {
		t.Errorf("without per-QoS cgroups: %q", got)
	}
}

func TestSystemdResources(t *testing.T) {
	shares, quota, period, mem, pids := uint64(256), int64(-1), uint64(100000), int64(64<<20), int64(100)
	l := Limits{CPUShares: &shares, CPUQuota: &quota, CPUPeriod: &period, Memory: &mem, Pids: &pids}
	r := (&systemdFS{}).resources(l)
	if r.CpuShares != 256 || r.CpuQuota != -1 || r.CpuPeriod != 100000 || r.Memory != 64<<20 || *r.PidsLimit != 100 || r.CpuWeight != 0 {
		t.Errorf("v1 resources %+v", r)
	}
	r = (&systemdFS{v2: true}).resources(l)
	if r.CpuShares != 0 || r.CpuWeight != SharesToWeight(256) {
		t.Errorf("v2 resources: shares %d weight %d", r.CpuShares, r.CpuWeight)
	}
	if r := (&systemdFS{}).resources(Limits{}); r.PidsLimit != nil || r.Memory != 0 || r.CpuShares != 0 {
		t.Errorf("empty limits set %+v", r)
	}
}
