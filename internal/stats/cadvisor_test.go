package stats

import (
	"bufio"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"

	"github.com/skiff-sh/skiff/internal/cri"
)

// verboseContainers answers verbose sandbox and container status with
// containerd's info JSON.
type verboseContainers struct {
	verboseRuntime
	containers map[string]string // container ID → info JSON
}

func (r verboseContainers) ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	resp, err := r.FakeRuntimeService.ContainerStatus(ctx, id, verbose)
	if err == nil && verbose {
		resp.Info = map[string]string{"info": r.containers[id]}
	}
	return resp, err
}

// cgroupFiles lays out one cgroup's files as cAdvisor reads them: 2 s of
// CPU (1.5 user, 0.5 system), a 50 ms quota per 100 ms, a 64 MiB limit,
// 8 MiB used with 1 MiB inactive file, some I/O on 8:0, and pid in it.
func cgroupFiles(t testing.TB, root, cg string, v2 bool, pid string) {
	if v2 {
		for f, c := range map[string]string{
			"cpu.stat":   "usage_usec 2000000\nuser_usec 1500000\nsystem_usec 500000\nnr_periods 40\nnr_throttled 4\nthrottled_usec 300000\n",
			"cpu.weight": "4\n", "cpu.max": "50000 100000\n", "memory.max": "67108864\n", "memory.swap.max": "max\n",
			"memory.min": "0\n", "memory.peak": "9437184\n", "memory.current": "8388608\n", "memory.swap.current": "0\n",
			"memory.stat":   "anon 4194304\nfile 2097152\nfile_mapped 4096\nactive_file 1048576\ninactive_file 1048576\npgfault 11\npgmajfault 1\n",
			"memory.events": "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n", "pids.current": "2\n", "pids.max": "max\n",
			"cpu.pressure": "some avg10=0.00 avg60=0.00 avg300=0.00 total=7000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=3000\n",
			"io.stat":      "8:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0\n", "cgroup.procs": pid + "\n",
		} {
			write(t, root, filepath.Join(cg, f), c)
		}
		return
	}
	for f, c := range map[string]string{
		"cpuacct/cpuacct.usage": "2000000000\n", "cpuacct/cpuacct.stat": "user 150\nsystem 50\n",
		"cpu/cpu.stat": "nr_periods 40\nnr_throttled 4\nthrottled_time 300000000\n", "cpu/cpu.shares": "4\n",
		"cpu/cpu.cfs_quota_us": "50000\n", "cpu/cpu.cfs_period_us": "100000\n", "cpu/cgroup.procs": pid + "\n",
		"memory/memory.usage_in_bytes": "8388608\n", "memory/memory.limit_in_bytes": "67108864\n",
		"memory/memory.max_usage_in_bytes": "9437184\n", "memory/memory.failcnt": "3\n",
		"memory/memory.soft_limit_in_bytes": "9223372036854771712\n", "memory/memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n",
		"memory/memory.stat": "total_cache 2097152\ntotal_rss 4194304\ntotal_mapped_file 4096\ntotal_active_file 1048576\ntotal_inactive_file 1048576\npgfault 11\npgmajfault 1\n",
		"pids/pids.current":  "2\n", "pids/pids.max": "max\n",
		"blkio/blkio.throttle.io_service_bytes_recursive": "8:0 Read 4096\n8:0 Write 8192\n8:0 Total 12288\nTotal 12288\n",
		"blkio/blkio.throttle.io_serviced_recursive":      "8:0 Read 1\n8:0 Write 2\n8:0 Total 3\nTotal 3\n",
	} {
		ctl, file, _ := strings.Cut(f, "/")
		write(t, root, filepath.Join(ctl, cg, file), c)
	}
}

// cadvisorFixture is a node with pods p0..p(n-1), each with a pod cgroup,
// a sandbox and a container "main", on cgroup v1 or v2.
func cadvisorFixture(t testing.TB, n int, v2 bool) *Provider {
	rt := critest.NewFakeRuntimeService()
	cg, proc, sys, etc := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	fakeProc(t, proc)
	write(t, proc, "cpuinfo", "processor\t: 0\nphysical id\t: 0\ncore id\t: 0\n\nprocessor\t: 1\nphysical id\t: 0\ncore id\t: 1\n")
	write(t, proc, "sys/kernel/random/boot_id", "boot-1\n")
	write(t, etc, "machine-id", "machine-1\n")
	write(t, sys, "dev/block/8:0/uevent", "MAJOR=8\nMINOR=0\nDEVNAME=sda\n")
	if v2 {
		write(t, cg, "cgroup.controllers", "cpu memory io pids\n")
	}
	vr := verboseContainers{verboseRuntime{rt, map[string]string{}}, map[string]string{}}
	var sbs []*critest.FakePodSandbox
	var ctrs []*critest.FakeContainer
	var stats []*runtimeapi.ContainerStats
	now := testTime.UnixNano()
	for i := 0; i < n; i++ {
		uid, name, sb, c := fmt.Sprintf("u%d", i), fmt.Sprintf("p%d", i), fmt.Sprintf("sb%d", i), fmt.Sprintf("c%d", i)
		pod := "/kubepods/burstable/pod" + uid
		sbPid, cPid := fmt.Sprint(1000+2*i), fmt.Sprint(1001+2*i)
		for _, x := range []struct{ cg, pid string }{{pod, ""}, {pod + "/" + sb, sbPid}, {pod + "/" + c, cPid}} {
			cgroupFiles(t, cg, x.cg, v2, x.pid)
		}
		write(t, proc, sbPid+"/net/dev", netDevFile)
		write(t, proc, cPid+"/limits", "Limit                     Soft Limit           Hard Limit           Units\nMax open files            1024                 4096                 files\n")
		if i == 0 {
			if err := os.MkdirAll(filepath.Join(proc, cPid, "fd"), 0o755); err != nil {
				t.Fatal(err)
			}
			for fd, target := range map[string]string{"0": "/dev/null", "3": "socket:[123]"} {
				if err := os.Symlink(target, filepath.Join(proc, cPid, "fd", fd)); err != nil {
					t.Fatal(err)
				}
			}
		}
		labels := map[string]string{cri.PodUIDLabel: uid, cri.PodNameLabel: name, cri.PodNamespaceLabel: "default"}
		sbs = append(sbs, &critest.FakePodSandbox{PodSandboxStatus: runtimeapi.PodSandboxStatus{
			Id: sb, State: runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: testTime.Add(-time.Hour).UnixNano(),
			Labels: labels, Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: uid}}})
		ctrs = append(ctrs, &critest.FakeContainer{SandboxID: sb, ContainerStatus: runtimeapi.ContainerStatus{
			Id: c, State: runtimeapi.ContainerState_CONTAINER_RUNNING, CreatedAt: testTime.Add(-time.Minute).UnixNano(),
			Image:  &runtimeapi.ImageSpec{Image: "docker.io/library/busybox:1.36"},
			Labels: labels, Metadata: &runtimeapi.ContainerMetadata{Name: "main"}}})
		// The runtime's figures differ from the cgroup files on purpose:
		// the series must show the runtime's, as the summary does.
		stats = append(stats, &runtimeapi.ContainerStats{Attributes: &runtimeapi.ContainerAttributes{Id: c},
			Cpu: &runtimeapi.CpuUsage{Timestamp: now, UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: 2100000000}},
			Memory: &runtimeapi.MemoryUsage{Timestamp: now, WorkingSetBytes: &runtimeapi.UInt64Value{Value: 7 << 20},
				UsageBytes: &runtimeapi.UInt64Value{Value: 8 << 20}, RssBytes: &runtimeapi.UInt64Value{Value: 4 << 20}}})
		vr.info[sb] = fmt.Sprintf(`{"pid":%s,"image":"registry.k8s.io/pause:3.10","runtimeSpec":{"linux":{"cgroupsPath":%q}}}`, sbPid, pod+"/"+sb)
		vr.containers[c] = fmt.Sprintf(`{"pid":%s,"runtimeSpec":{"linux":{"cgroupsPath":%q}}}`, cPid, pod+"/"+c)
	}
	rt.SetFakeSandboxes(sbs)
	rt.SetFakeContainers(ctrs)
	rt.SetFakeContainerStats(stats)
	rt.InjectError("ListPodSandboxStats", fmt.Errorf("not implemented"))
	p := New(Config{Runtime: vr, Images: critest.NewFakeImageService(), NodeName: "n1", RootDir: t.TempDir(),
		CgroupRoot: cg, ProcRoot: proc, SysRoot: sys, EtcRoot: etc})
	p.now = func() time.Time { return testTime }
	return p
}

// scrapeCadvisor serves /metrics/cadvisor once and parses it as Prometheus
// does.
func scrapeCadvisor(t *testing.T, p *Provider) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	p.CadvisorHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics/cadvisor", nil))
	if ct := rec.Header().Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
		t.Errorf("content type %q", ct)
	}
	var parser expfmt.TextParser
	mfs, err := parser.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return mfs
}

// familySignature is a family as testdata/cadvisor_upstream.txt lists it:
// name, type, label names, help.
func familySignature(mf *dto.MetricFamily) string {
	labels := map[string]bool{}
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = true
		}
	}
	names := make([]string, 0, len(labels))
	for l := range labels {
		names = append(names, l)
	}
	sort.Strings(names)
	return strings.Join([]string{mf.GetName(), strings.ToLower(mf.GetType().String()), strings.Join(names, ","), mf.GetHelp()}, "\t")
}

// upstreamFamilies reads the families that cAdvisor's own collector writes
// for the upstream kubelet (written by hack/tools/cadvisorgolden).
func upstreamFamilies(t *testing.T) []string {
	f, err := os.Open("testdata/cadvisor_upstream.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// The families, types, help texts and label names are cAdvisor's, on both
// cgroup versions, for a pod whose cgroups have every figure.
func TestCadvisorFamiliesAsUpstream(t *testing.T) {
	want := upstreamFamilies(t)
	for _, v2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("v2=%v", v2), func(t *testing.T) {
			p := cadvisorFixture(t, 1, v2)
			if err := p.Sample(context.Background()); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, mf := range scrapeCadvisor(t, p) {
				got = append(got, familySignature(mf))
			}
			sort.Strings(got)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("families differ from cAdvisor's:\n%s", diffLines(got, want))
			}
		})
	}
}

func diffLines(got, want []string) string {
	in := func(s []string, x string) bool {
		for _, y := range s {
			if x == y {
				return true
			}
		}
		return false
	}
	var b strings.Builder
	for _, g := range got {
		if !in(want, g) {
			fmt.Fprintf(&b, "+ %s\n", g)
		}
	}
	for _, w := range want {
		if !in(got, w) {
			fmt.Fprintf(&b, "- %s\n", w)
		}
	}
	return b.String()
}

// series finds the value of the one series of family whose labels hold
// all of want; it fails the test when there is not exactly one.
func series(t *testing.T, mfs map[string]*dto.MetricFamily, family string, want map[string]string) float64 {
	t.Helper()
	var found []float64
	for _, m := range mfs[family].GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		ok := true
		for k, v := range want {
			ok = ok && have[k] == v
		}
		if ok {
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue() + m.GetUntyped().GetValue()
			found = append(found, v)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s%v: %d series", family, want, len(found))
	}
	return found[0]
}

// The values come from the cgroups and, for the CPU and memory totals,
// from the sample the summary shows; labels name the pod cgroup, the
// sandbox and the container as cAdvisor does.
func TestCadvisorValues(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("v2=%v", v2), func(t *testing.T) {
			p := cadvisorFixture(t, 2, v2)
			if err := p.Sample(context.Background()); err != nil {
				t.Fatal(err)
			}
			mfs := scrapeCadvisor(t, p)
			sum, err := p.Summary(context.Background(), false)
			if err != nil {
				t.Fatal(err)
			}
			ctr := map[string]string{"container": "main", "pod": "p0", "namespace": "default", "name": "c0",
				"id": "/kubepods/burstable/podu0/c0", "image": "docker.io/library/busybox:1.36"}
			sb := map[string]string{"container": "", "pod": "p0", "name": "sb0", "id": "/kubepods/burstable/podu0/sb0",
				"image": "registry.k8s.io/pause:3.10"}
			pod := map[string]string{"container": "", "pod": "p0", "namespace": "default", "name": "", "image": "",
				"id": "/kubepods/burstable/podu0"}
			sc, sp := sum.Pods[0].Containers[0], sum.Pods[0]
			for _, c := range []struct {
				family string
				labels map[string]string
				want   float64
			}{
				// The summary's figures, the runtime's for the container.
				{"container_cpu_usage_seconds_total", ctr, float64(*sc.CPU.UsageCoreNanoSeconds) / 1e9},
				{"container_cpu_usage_seconds_total", ctr, 2.1},
				{"container_memory_working_set_bytes", ctr, float64(*sc.Memory.WorkingSetBytes)},
				{"container_memory_usage_bytes", ctr, float64(*sc.Memory.UsageBytes)},
				{"container_cpu_usage_seconds_total", pod, float64(*sp.CPU.UsageCoreNanoSeconds) / 1e9},
				{"container_memory_working_set_bytes", pod, float64(*sp.Memory.WorkingSetBytes)},
				{"container_start_time_seconds", ctr, float64(sc.StartTime.Unix())},
				// The cgroup's.
				{"container_cpu_usage_seconds_total", sb, 2},
				{"container_cpu_user_seconds_total", ctr, 1.5},
				{"container_cpu_system_seconds_total", ctr, 0.5},
				{"container_cpu_cfs_periods_total", ctr, 40},
				{"container_cpu_cfs_throttled_periods_total", ctr, 4},
				{"container_cpu_cfs_throttled_seconds_total", ctr, 0.3},
				{"container_spec_cpu_quota", ctr, 50000},
				{"container_spec_cpu_period", ctr, 100000},
				// v2: cpu.weight 4 back to shares as cAdvisor converts it.
				{"container_spec_cpu_shares", ctr, map[bool]float64{false: 4, true: 2 + 3*262142/9999}[v2]},
				{"container_spec_memory_limit_bytes", ctr, 64 << 20},
				{"container_spec_memory_swap_limit_bytes", ctr, 0},
				{"container_spec_memory_reservation_limit_bytes", ctr, 0},
				{"container_memory_max_usage_bytes", pod, 9 << 20},
				{"container_memory_cache", pod, 2 << 20},
				{"container_memory_rss", ctr, 4 << 20},
				{"container_memory_mapped_file", pod, 4096},
				{"container_memory_total_inactive_file_bytes", pod, 1 << 20},
				{"container_oom_events_total", ctr, 1},
				{"container_threads", ctr, 2},
				{"container_threads_max", ctr, 0},
				{"container_processes", ctr, 1},
				{"container_processes", pod, 0},
				{"container_file_descriptors", ctr, 2},
				{"container_sockets", ctr, 1},
				{"container_ulimits_soft", ctr, 1024},
				{"container_fs_reads_bytes_total", with(ctr, "device", "/dev/sda"), 4096},
				{"container_fs_writes_total", with(ctr, "device", "/dev/sda"), 2},
				{"container_blkio_device_usage_total", with(with(ctr, "operation", "Write"), "major", "8"), 8192},
				{"container_memory_failures_total", with(with(ctr, "failure_type", "pgfault"), "scope", "hierarchy"), 11},
				{"container_network_receive_bytes_total", with(sb, "interface", "eth0"), 1000},
				{"container_network_transmit_errors_total", with(sb, "interface", "eth0"), 2},
				{"container_network_receive_packets_total", with(sb, "interface", "eth0"), 10},
				{"machine_cpu_cores", map[string]string{"machine_id": "machine-1", "boot_id": "boot-1"}, 2},
				{"machine_cpu_sockets", nil, 1},
				{"machine_memory_bytes", nil, 8 << 30},
				{"container_scrape_error", nil, 0},
			} {
				if got := series(t, mfs, c.family, c.labels); got != c.want {
					t.Errorf("%s%v = %v, want %v", c.family, c.labels, got, c.want)
				}
			}
			if v2 {
				if got := series(t, mfs, "container_pressure_cpu_stalled_seconds_total", ctr); got != 0.003 {
					t.Errorf("cpu full pressure %v, want 0.003", got)
				}
				if got := series(t, mfs, "container_memory_failcnt", ctr); got != 0 {
					t.Errorf("v2 failcnt %v, want 0 as cAdvisor", got)
				}
			} else if got := series(t, mfs, "container_memory_failcnt", ctr); got != 3 {
				t.Errorf("v1 failcnt %v, want 3", got)
			}
			// Network series are the sandbox's alone; two pods, three
			// entities each.
			if n := len(mfs["container_network_receive_bytes_total"].GetMetric()); n != 2 {
				t.Errorf("%d network series, want one per sandbox", n)
			}
			if n := len(mfs["container_last_seen"].GetMetric()); n != 6 {
				t.Errorf("%d entities, want 6", n)
			}
		})
	}
}

func with(m map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for a, b := range m {
		out[a] = b
	}
	return out
}

// No limit shows as 0, as cAdvisor shows it; a quota of -1 (none) leaves
// the quota and throttling series out.
func TestCadvisorUnlimited(t *testing.T) {
	p := cadvisorFixture(t, 1, false)
	cg := p.cfg.CgroupRoot
	write(t, cg, "memory/kubepods/burstable/podu0/c0/memory.limit_in_bytes", "9223372036854771712\n")
	write(t, cg, "cpu/kubepods/burstable/podu0/c0/cpu.cfs_quota_us", "-1\n")
	if err := p.Sample(context.Background()); err != nil {
		t.Fatal(err)
	}
	mfs := scrapeCadvisor(t, p)
	c0 := map[string]string{"name": "c0"}
	if got := series(t, mfs, "container_spec_memory_limit_bytes", c0); got != 0 {
		t.Errorf("unlimited memory shows %v, want 0", got)
	}
	for _, f := range []string{"container_spec_cpu_quota", "container_cpu_cfs_periods_total", "container_cpu_cfs_throttled_seconds_total"} {
		for _, m := range mfs[f].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" && l.GetValue() == "c0" {
					t.Errorf("%s shown for a container without a quota", f)
				}
			}
		}
	}
}

// When the scrape's sample fails (the runtime is down), before any sample
// or after samples without the cAdvisor figures, the scrape says so in
// container_scrape_error and still shows the machine.
func TestCadvisorScrapeError(t *testing.T) {
	for _, earlier := range []bool{false, true} {
		t.Run(fmt.Sprintf("earlier sample=%v", earlier), func(t *testing.T) {
			p := cadvisorFixture(t, 1, false)
			if earlier {
				if err := p.Sample(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			p.cfg.Runtime.(verboseContainers).FakeRuntimeService.InjectError("ListPodSandbox", fmt.Errorf("runtime down"))
			mfs := scrapeCadvisor(t, p)
			if got := series(t, mfs, "container_scrape_error", nil); got != 1 {
				t.Errorf("container_scrape_error %v, want 1", got)
			}
			if got := series(t, mfs, "machine_cpu_cores", nil); got != 2 {
				t.Errorf("machine_cpu_cores %v", got)
			}
		})
	}
}

// BenchmarkCadvisorScrape is one /metrics/cadvisor scrape of a node with
// 100 pods (300 cgroups: pod, sandbox, container), from a taken sample.
func BenchmarkCadvisorScrape(b *testing.B) {
	p := cadvisorFixture(b, 100, false)
	h := p.CadvisorHandler()
	req := httptest.NewRequest("GET", "/metrics/cadvisor", nil)
	// The first scrape takes the sample with the cgroup figures.
	h.ServeHTTP(httptest.NewRecorder(), req)
	if len(p.snap.cadvisor) != 300 {
		b.Fatalf("%d cgroups sampled, want 300", len(p.snap.cadvisor))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if i == 0 {
			b.ReportMetric(float64(rec.Body.Len()), "bytes/scrape")
		}
	}
}

// BenchmarkSample100Pods is the periodic sample behind it and
// /stats/summary, without and with the cgroup figures /metrics/cadvisor
// shows (read only while it is scraped): the runtime's lists from the CRI
// fake, the cgroups from files.
func BenchmarkSample100Pods(b *testing.B) {
	for _, scraped := range []bool{false, true} {
		b.Run(fmt.Sprintf("cadvisor=%v", scraped), func(b *testing.B) {
			p := cadvisorFixture(b, 100, false)
			if scraped {
				p.cadvisorAsked.Store(testTime.UnixNano())
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := p.Sample(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Samples read the cgroup figures only while /metrics/cadvisor is
// scraped: not before the first scrape, and not once it has not been
// scraped for cadvisorIdle.
func TestCadvisorFiguresOnlyWhileScraped(t *testing.T) {
	p := cadvisorFixture(t, 1, false)
	now := testTime
	p.now = func() time.Time { return now }
	entities := func() int {
		t.Helper()
		if err := p.Sample(context.Background()); err != nil {
			t.Fatal(err)
		}
		return len(p.snap.cadvisor)
	}
	if n := entities(); n != 0 {
		t.Errorf("%d entities read before any scrape", n)
	}
	scrapeCadvisor(t, p)
	now = now.Add(cadvisorIdle - time.Second)
	if n := entities(); n != 3 {
		t.Errorf("%d entities read while scraped, want 3", n)
	}
	now = now.Add(2 * time.Second)
	if n := entities(); n != 0 {
		t.Errorf("%d entities read %v after the last scrape", n, cadvisorIdle+time.Second)
	}
}
