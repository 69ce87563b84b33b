package stats

import (
	"path/filepath"
	"testing"
)

func TestReadCgroups(t *testing.T) {
	v1 := t.TempDir()
	cgroupV1(t, v1, "/", "5000", "1000000", "cache 1\ntotal_inactive_file 400000\ntotal_rss 300000\ntotal_pgfault 9\ntotal_pgmajfault 2\n")
	cgroupV1(t, v1, "/k8s.io/abc", "42", "2000", "total_inactive_file 3000\ntotal_rss 100\n")

	v2 := t.TempDir()
	write(t, v2, "cgroup.controllers", "cpu memory\n")
	write(t, v2, "kubepods.slice/pod1/cpu.stat", "usage_usec 1500\nuser_usec 1000\n")
	write(t, v2, "kubepods.slice/pod1/memory.current", "9000\n")
	write(t, v2, "kubepods.slice/pod1/memory.stat", "anon 4000\ninactive_file 1000\npgfault 3\npgmajfault 1\n")

	for _, tc := range []struct {
		name, root, path string
		want             cpuMem
		wantErr          bool
	}{
		{"v1 root", v1, "/", cpuMem{cpuNanos: 5000, usage: 1000000, workingSet: 600000, rss: 300000, pageFaults: 9, majorPageFaults: 2}, false},
		{"v1 child, inactive above usage", v1, "/k8s.io/abc", cpuMem{cpuNanos: 42, usage: 2000, workingSet: 0, rss: 100}, false},
		{"v2", v2, "/kubepods.slice/pod1", cpuMem{cpuNanos: 1500000, usage: 9000, workingSet: 8000, rss: 4000, pageFaults: 3, majorPageFaults: 1}, false},
		{"missing", v1, "/nope", cpuMem{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cg := detectCgroups(tc.root)
			if cg.v2 != (tc.root == v2) {
				t.Fatalf("detected v2=%v", cg.v2)
			}
			got, err := cg.read(tc.path)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v", err)
			}
			if !tc.wantErr && got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestCgroupPath(t *testing.T) {
	for in, want := range map[string]string{
		"/k8s.io/abc": "/k8s.io/abc",
		"kubepods-besteffort-pod12.slice:cri-containerd:abc": "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod12.slice/cri-containerd-abc.scope",
		"system.slice:containerd:xyz":                        "/system.slice/containerd-xyz.scope",
		":cri-containerd:abc":                                "/cri-containerd-abc.scope",
	} {
		if got := cgroupPath(in); got != want {
			t.Errorf("cgroupPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNetDevAndNetwork(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "dev", netDevNode)
	ifaces, err := netDev(filepath.Join(dir, "dev"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ifaces) != 2 || ifaces[0].Name != "eth0" || ifaces[1].Name != "ens5" {
		t.Fatalf("interfaces %+v: want eth0 and ens5 (no lo, no veth)", ifaces)
	}
	e := ifaces[0]
	if *e.RxBytes != 1000 || *e.RxErrors != 1 || *e.TxBytes != 2000 || *e.TxErrors != 2 {
		t.Errorf("eth0 %+v", e)
	}
	if n := network(testTime, ifaces, "ens5"); n.Name != "ens5" || len(n.Interfaces) != 2 {
		t.Errorf("default interface %q, want ens5 (the default route's)", n.Name)
	}
	if n := network(testTime, ifaces, ""); n.Name != "eth0" {
		t.Errorf("without a default route: %q, want eth0", n.Name)
	}
	if network(testTime, nil, "") != nil {
		t.Error("no interfaces must give no network stats")
	}
}

func TestHostFiguresFromProc(t *testing.T) {
	proc := t.TempDir()
	fakeProc(t, proc)
	v2 := t.TempDir()
	write(t, v2, "cgroup.controllers", "cpu memory\n")
	h := host{cg: detectCgroups(v2), proc: proc}
	m, err := h.nodeCPUMem()
	if err != nil {
		t.Fatal(err)
	}
	// No root cpu.stat: /proc/stat's busy ticks (user 100 + system 50) at 100 Hz.
	want := cpuMem{cpuNanos: 1500 * 1e6, usage: 4 << 30, workingSet: 3 << 30, rss: 512 << 20, pageFaults: 77, majorPageFaults: 7}
	if m != want {
		t.Errorf("node from /proc: %+v, want %+v", m, want)
	}
	write(t, v2, "cpu.stat", "usage_usec 2000000\n")
	if m, _ := h.nodeCPUMem(); m.cpuNanos != 2e9 {
		t.Errorf("node CPU from the v2 root cpu.stat: %d", m.cpuNanos)
	}
	r := h.rlimit(testTime)
	if *r.MaxPID != 4194304 || *r.NumOfRunningProcesses != 345 {
		t.Errorf("rlimit %+v", r)
	}
	if h.memoryCapacity() != 8<<30 || h.bootTime().Unix() != 1700000000 || h.defaultRouteInterface() != "ens5" {
		t.Errorf("capacity %d boot %v route %q", h.memoryCapacity(), h.bootTime(), h.defaultRouteInterface())
	}
}
