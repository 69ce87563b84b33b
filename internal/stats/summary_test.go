package stats

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/skiff-sh/skiff/internal/cri"
)

var testTime = time.Unix(1800000000, 0)

// fixture is a node with one pod (sandbox sb1, container c1 "main") on a
// fake runtime, fake cgroup and /proc trees, and real directories.
type fixture struct {
	p      *Provider
	rt     *critest.FakeRuntimeService
	images *critest.FakeImageService
	cg     string
	now    time.Time
	imgDir string
}

var podLabels = map[string]string{cri.PodUIDLabel: "u1", cri.PodNameLabel: "p1", cri.PodNamespaceLabel: "default"}

func newFixture(t *testing.T) *fixture {
	f := &fixture{rt: critest.NewFakeRuntimeService(), cg: t.TempDir(), now: testTime, imgDir: t.TempDir()}
	proc, root, logs := t.TempDir(), t.TempDir(), t.TempDir()
	fakeProc(t, proc)
	write(t, proc, "4242/net/dev", netDevFile)
	cgroupV1(t, f.cg, "/", "5000000000", "3000000000", "total_inactive_file 1000000000\ntotal_rss 700000000\n")
	cgroupV1(t, f.cg, "/k8s.io/sb1", "1000000", "1048576", "total_inactive_file 0\ntotal_rss 524288\n")
	write(t, root, "pods/u1/volumes/kubernetes.io~empty-dir/data/file", strings.Repeat("x", 8192))
	write(t, logs, "default_p1_u1/main/0.log", strings.Repeat("log line\n", 100))

	f.rt.SetFakeSandboxes([]*critest.FakePodSandbox{{PodSandboxStatus: runtimeapi.PodSandboxStatus{
		Id: "sb1", State: runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: testTime.Add(-time.Hour).UnixNano(),
		Labels: podLabels, Metadata: &runtimeapi.PodSandboxMetadata{Name: "p1", Namespace: "default", Uid: "u1"},
	}}})
	f.rt.SetFakeContainers([]*critest.FakeContainer{{SandboxID: "sb1", ContainerStatus: runtimeapi.ContainerStatus{
		Id: "c1", State: runtimeapi.ContainerState_CONTAINER_RUNNING, CreatedAt: testTime.Add(-time.Minute).UnixNano(),
		Labels: podLabels, Metadata: &runtimeapi.ContainerMetadata{Name: "main"},
	}}})
	f.setContainerCPU(2e9)
	images := critest.NewFakeImageService()
	f.images = images
	images.SetFakeFilesystemUsage([]*runtimeapi.FilesystemUsage{{
		FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: f.imgDir}, UsedBytes: &runtimeapi.UInt64Value{Value: 123456},
		InodesUsed: &runtimeapi.UInt64Value{Value: 78},
	}})
	rt := verboseRuntime{f.rt, map[string]string{"sb1": `{"pid":4242,"runtimeSpec":{"linux":{"cgroupsPath":"/k8s.io/sb1"}}}`}}
	f.p = New(Config{Runtime: rt, Images: images, NodeName: "n1", RootDir: root, PodLogsDir: logs,
		CgroupRoot: f.cg, ProcRoot: proc})
	f.p.now = func() time.Time { return f.now }
	return f
}

func (f *fixture) setContainerCPU(nanos uint64) {
	ts := f.now.UnixNano()
	f.rt.SetFakeContainerStats([]*runtimeapi.ContainerStats{{
		Attributes: &runtimeapi.ContainerAttributes{Id: "c1", Metadata: &runtimeapi.ContainerMetadata{Name: "main"}},
		Cpu:        &runtimeapi.CpuUsage{Timestamp: ts, UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: nanos}},
		Memory: &runtimeapi.MemoryUsage{Timestamp: ts, WorkingSetBytes: &runtimeapi.UInt64Value{Value: 10 << 20},
			UsageBytes: &runtimeapi.UInt64Value{Value: 12 << 20}, RssBytes: &runtimeapi.UInt64Value{Value: 9 << 20}},
		WritableLayer: &runtimeapi.FilesystemUsage{Timestamp: ts, FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: f.imgDir},
			UsedBytes: &runtimeapi.UInt64Value{Value: 4096}, InodesUsed: &runtimeapi.UInt64Value{Value: 3}},
	}})
}

// sampleTwice takes a sample, advances 2 s in which the node used one
// core and the container half a core, and samples again.
func (f *fixture) sampleTwice(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if err := f.p.Sample(ctx); err != nil {
		t.Fatal(err)
	}
	f.now = f.now.Add(2 * time.Second)
	cgroupV1(t, f.cg, "/", "7000000000", "3000000000", "total_inactive_file 1000000000\ntotal_rss 700000000\n")
	f.setContainerCPU(3e9)
	if err := f.p.Sample(ctx); err != nil {
		t.Fatal(err)
	}
	f.p.walkDisk(ctx)
}

func eq(t *testing.T, what string, got *uint64, want uint64) {
	t.Helper()
	if got == nil || *got != want {
		t.Errorf("%s = %v, want %d", what, deref(got), want)
	}
}

// containerd 1.6 fails ListPodSandboxStats for pods without a cgroup
// parent: pod figures then come from the sandbox cgroup plus containers.
func TestSummaryFromCgroupsWhenSandboxStatsFail(t *testing.T) {
	f := newFixture(t)
	f.rt.InjectError("ListPodSandboxStats", errors.New("failed to get cgroup metrics: cgroupPath is empty"))
	f.sampleTwice(t)
	s, err := f.p.Summary(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	n := s.Node
	eq(t, "node usageNanoCores", n.CPU.UsageNanoCores, 1e9)
	eq(t, "node usageCoreNanoSeconds", n.CPU.UsageCoreNanoSeconds, 7e9)
	eq(t, "node workingSet", n.Memory.WorkingSetBytes, 2e9)
	eq(t, "node available", n.Memory.AvailableBytes, 8<<30-2e9)
	eq(t, "node rss", n.Memory.RSSBytes, 7e8)
	if n.NodeName != "n1" || n.StartTime.Unix() != 1700000000 {
		t.Errorf("node name %q start %v", n.NodeName, n.StartTime)
	}
	if n.Network == nil || n.Network.Name != "ens5" || len(n.Network.Interfaces) != 2 {
		t.Errorf("node network %+v", n.Network)
	}
	if n.Fs == nil || deref(n.Fs.CapacityBytes) == 0 || n.Runtime == nil || n.Runtime.ImageFs == nil {
		t.Fatalf("node fs %+v runtime %+v", n.Fs, n.Runtime)
	}
	eq(t, "imageFs used", n.Runtime.ImageFs.UsedBytes, 123456)
	eq(t, "imageFs inodesUsed", n.Runtime.ImageFs.InodesUsed, 78)
	if n.Rlimit == nil || *n.Rlimit.NumOfRunningProcesses != 345 {
		t.Errorf("rlimit %+v", n.Rlimit)
	}

	if len(s.Pods) != 1 {
		t.Fatalf("%d pods", len(s.Pods))
	}
	p := s.Pods[0]
	if p.PodRef != (statsapi.PodReference{Name: "p1", Namespace: "default", UID: "u1"}) {
		t.Errorf("pod ref %+v", p.PodRef)
	}
	// Sandbox cgroup (1 ms, 1 MiB) plus the container (3 s, 10 MiB).
	eq(t, "pod usageCoreNanoSeconds", p.CPU.UsageCoreNanoSeconds, 3e9+1e6)
	eq(t, "pod usageNanoCores", p.CPU.UsageNanoCores, 5e8)
	eq(t, "pod workingSet", p.Memory.WorkingSetBytes, 11<<20)
	if len(p.Containers) != 1 {
		t.Fatalf("containers %+v", p.Containers)
	}
	c := p.Containers[0]
	if c.Name != "main" || !c.StartTime.Time.Equal(testTime.Add(-time.Minute)) {
		t.Errorf("container %s start %v", c.Name, c.StartTime)
	}
	eq(t, "container usageNanoCores", c.CPU.UsageNanoCores, 5e8)
	eq(t, "container workingSet", c.Memory.WorkingSetBytes, 10<<20)
	eq(t, "container rootfs used", c.Rootfs.UsedBytes, 4096)
	if c.Logs == nil || deref(c.Logs.UsedBytes) < 900 {
		t.Errorf("container logs %+v", c.Logs)
	}
	if len(p.VolumeStats) != 1 || p.VolumeStats[0].Name != "data" || deref(p.VolumeStats[0].UsedBytes) < 8192 {
		t.Errorf("volumes %+v", p.VolumeStats)
	}
	if want := 4096 + deref(c.Logs.UsedBytes) + deref(p.VolumeStats[0].UsedBytes); deref(p.EphemeralStorage.UsedBytes) != want {
		t.Errorf("ephemeral storage %d, want rootfs+logs+volumes %d", deref(p.EphemeralStorage.UsedBytes), want)
	}
	if p.Network == nil || p.Network.Name != "eth0" || len(p.Network.Interfaces) != 1 {
		t.Errorf("pod network from the sandbox's netns: %+v", p.Network)
	}

	only, err := f.p.Summary(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	op := only.Pods[0]
	if only.Node.Fs != nil || only.Node.Network != nil || only.Node.Rlimit != nil || op.Network != nil ||
		op.VolumeStats != nil || op.EphemeralStorage != nil || op.Containers[0].Rootfs != nil || op.CPU == nil || op.Memory == nil {
		t.Errorf("only_cpu_and_memory carries more than CPU and memory: %+v", op)
	}
	// The failed call is not repeated on every sample.
	calls := 0
	for _, c := range f.rt.GetCalls() {
		if c == "ListPodSandboxStats" {
			calls++
		}
	}
	if calls != 1 {
		t.Errorf("ListPodSandboxStats called %d times, want once then left alone", calls)
	}
}

// A runtime with sandbox stats gives the pod totals itself; containers are
// not added on top.
func TestSummaryFromSandboxStats(t *testing.T) {
	f := newFixture(t)
	setSandbox := func(nanos uint64) {
		ts := f.now.UnixNano()
		f.rt.SetFakePodSandboxStats([]*runtimeapi.PodSandboxStats{{
			Attributes: &runtimeapi.PodSandboxAttributes{Id: "sb1"},
			Linux: &runtimeapi.LinuxPodSandboxStats{
				Cpu:    &runtimeapi.CpuUsage{Timestamp: ts, UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: nanos}},
				Memory: &runtimeapi.MemoryUsage{Timestamp: ts, WorkingSetBytes: &runtimeapi.UInt64Value{Value: 20 << 20}},
				Network: &runtimeapi.NetworkUsage{Timestamp: ts, DefaultInterface: &runtimeapi.NetworkInterfaceUsage{Name: "eth0"},
					Interfaces: []*runtimeapi.NetworkInterfaceUsage{{Name: "eth0", RxBytes: &runtimeapi.UInt64Value{Value: 55}}}},
			},
		}})
	}
	ctx := context.Background()
	setSandbox(10e9)
	if err := f.p.Sample(ctx); err != nil {
		t.Fatal(err)
	}
	f.now = f.now.Add(4 * time.Second)
	setSandbox(14e9)
	f.setContainerCPU(3e9)
	if err := f.p.Sample(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := f.p.Summary(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	p := s.Pods[0]
	eq(t, "pod usageCoreNanoSeconds", p.CPU.UsageCoreNanoSeconds, 14e9)
	eq(t, "pod usageNanoCores", p.CPU.UsageNanoCores, 1e9)
	eq(t, "pod workingSet", p.Memory.WorkingSetBytes, 20<<20)
	if p.Network == nil || deref(p.Network.RxBytes) != 55 {
		t.Errorf("pod network from sandbox stats: %+v", p.Network)
	}
}

// The first sample has no rate; a counter that went back (a restarted
// container) has none either.
func TestRates(t *testing.T) {
	f := newFixture(t)
	f.rt.InjectError("ListPodSandboxStats", errors.New("unimplemented"))
	s, err := f.p.Summary(context.Background(), true) // samples on demand
	if err != nil {
		t.Fatal(err)
	}
	if s.Node.CPU.UsageNanoCores != nil || s.Pods[0].CPU.UsageNanoCores != nil {
		t.Error("a first sample cannot have a rate")
	}
	f.now = f.now.Add(time.Second)
	f.setContainerCPU(1e9) // was 2e9
	if err := f.p.Sample(context.Background()); err != nil {
		t.Fatal(err)
	}
	s, _ = f.p.Summary(context.Background(), true)
	if r := s.Pods[0].Containers[0].CPU.UsageNanoCores; r != nil {
		t.Errorf("rate %d across a counter reset", *r)
	}
}

func TestResourceMetrics(t *testing.T) {
	f := newFixture(t)
	f.rt.InjectError("ListPodSandboxStats", errors.New("unimplemented"))
	f.sampleTwice(t)
	rec := httptest.NewRecorder()
	f.p.ResourceHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics/resource", nil))
	body := rec.Body.String()
	for _, want := range []string{
		"node_cpu_usage_seconds_total 7 1800000002000",
		"node_memory_working_set_bytes 2e+09 1800000002000",
		`container_cpu_usage_seconds_total{container="main",namespace="default",pod="p1"} 3 1800000002000`,
		`container_memory_working_set_bytes{container="main",namespace="default",pod="p1"} 1.048576e+07`,
		`container_start_time_seconds{container="main",namespace="default",pod="p1"} 1.79999994e+09`,
		`pod_cpu_usage_seconds_total{namespace="default",pod="p1"} 3.001`,
		`pod_memory_working_set_bytes{namespace="default",pod="p1"} 1.1534336e+07`,
		"resource_scrape_error 0",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics/resource lacks %q:\n%s", want, body)
		}
	}

	f.rt.InjectError("ListPodSandbox", errors.New("runtime down"))
	f.p.snap = nil
	rec = httptest.NewRecorder()
	f.p.ResourceHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics/resource", nil))
	if !strings.Contains(rec.Body.String(), "resource_scrape_error 1") {
		t.Errorf("a failed scrape must say so:\n%s", rec.Body.String())
	}
}

// A failed ListPodSandboxStats is left alone for 30 s, then for twice as
// long each time it fails again; one success makes it tried on every
// sample once more.
func TestSandboxStatsRetryBackOff(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	calls := func() int {
		n := 0
		for _, c := range f.rt.GetCalls() {
			if c == "ListPodSandboxStats" {
				n++
			}
		}
		return n
	}
	sampleAt := func(after time.Duration, wantCalls int) {
		t.Helper()
		f.now = f.now.Add(after)
		if err := f.p.Sample(ctx); err != nil {
			t.Fatal(err)
		}
		if got := calls(); got != wantCalls {
			t.Fatalf("after %v more: ListPodSandboxStats called %d times, want %d", after, got, wantCalls)
		}
	}
	fail := func() { f.rt.InjectError("ListPodSandboxStats", errors.New("sandbox sb9 not found")) }

	fail()
	sampleAt(0, 1)              // fails: left alone for 30 s
	sampleAt(20*time.Second, 1) // skipped
	fail()
	sampleAt(11*time.Second, 2) // tried again, fails: 60 s now
	sampleAt(50*time.Second, 2) // skipped
	sampleAt(11*time.Second, 3) // tried again, succeeds
	sampleAt(time.Second, 4)    // and every sample after a success
	fail()
	sampleAt(time.Second, 5) // a new failure starts over at 30 s
	sampleAt(29*time.Second, 5)
	sampleAt(2*time.Second, 6)
}

// A runtime that reports its containers' filesystem apart from its image
// filesystem (ImageFsInfo's container_filesystems) gets each shown as
// itself, and the containers' rootfs on the former; one that reports only
// the image filesystem has it as both.
func TestSummarySplitContainerFs(t *testing.T) {
	for _, split := range []bool{false, true} {
		f := newFixture(t)
		if split {
			f.images.SetFakeContainerFilesystemUsage([]*runtimeapi.FilesystemUsage{{
				FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: t.TempDir()}, UsedBytes: &runtimeapi.UInt64Value{Value: 999},
				InodesUsed: &runtimeapi.UInt64Value{Value: 9},
			}})
		}
		f.sampleTwice(t)
		s, err := f.p.Summary(context.Background(), false)
		if err != nil {
			t.Fatal(err)
		}
		rt := s.Node.Runtime
		if rt == nil || rt.ImageFs == nil || rt.ContainerFs == nil {
			t.Fatalf("split=%v: runtime stats %+v", split, rt)
		}
		eq(t, "imageFs used", rt.ImageFs.UsedBytes, 123456)
		wantUsed, wantIno := uint64(123456), uint64(78)
		if split {
			wantUsed, wantIno = 999, 9
		}
		eq(t, "containerFs used", rt.ContainerFs.UsedBytes, wantUsed)
		eq(t, "containerFs inodesUsed", rt.ContainerFs.InodesUsed, wantIno)
		if len(s.Pods) != 1 || len(s.Pods[0].Containers) != 1 || s.Pods[0].Containers[0].Rootfs == nil {
			t.Fatalf("split=%v: no container rootfs in %+v", split, s.Pods)
		}
		eq(t, "rootfs used", s.Pods[0].Containers[0].Rootfs.UsedBytes, 4096)
	}
}
