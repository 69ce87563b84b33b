//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// cadvisorUpstream lists the families (name, type, label names, help)
// cAdvisor's own collectors give the upstream kubelet v1.34 for a pod on
// containerd; hack/tools/cadvisorgolden writes it from cAdvisor's code.
const cadvisorUpstream = "../../internal/stats/testdata/cadvisor_upstream.txt"

// Disk I/O families appear only for cgroups that did block I/O.
var cadvisorOptional = map[string]bool{
	"container_blkio_device_usage_total": true, "container_fs_reads_bytes_total": true,
	"container_fs_reads_total": true, "container_fs_writes_bytes_total": true, "container_fs_writes_total": true,
}

// proxyGet gets a kubelet path through the apiserver's node proxy.
func (cn *clusterNode) proxyGet(t *testing.T, p string) []byte {
	t.Helper()
	b, err := cn.admin.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", cn.hostname(), "proxy", p).DoRaw(cn.ctx())
	must(t, err)
	return b
}

// For a running pod, /metrics/cadvisor through the apiserver's node proxy
// holds cAdvisor's families with its types, help and label names, and
// series for the pod cgroup, the sandbox (with its network) and the
// container whose values are the cgroup's: the limits of the spec, CPU
// within a sampling period of the cgroup's own count. The container's CPU
// and memory are the figures /stats/summary shows for the same sample.
func TestCadvisorMetricsThroughProxy(t *testing.T) {
	cn := sharedNode(t)
	pod := busyboxPod("cadvisor", "while :; do :; done")
	pod.Spec.Containers[0].Resources.Limits = v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("48Mi")}
	pod = cn.createPod(t, pod)
	cn.waitPod(t, cn.ns, pod.Name, 60*time.Second, "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })

	var mfs map[string]*dto.MetricFamily
	var ctr map[string]string
	waitFor(t, 30*time.Second, "the container's series", func() (bool, error) {
		mfs = parseScrape(t, cn.proxyGet(t, "metrics/cadvisor"))
		ctr = findSeries(mfs, "container_spec_memory_limit_bytes", map[string]string{"namespace": cn.ns, "pod": pod.Name, "container": "main"})
		return ctr != nil, nil
	})
	checkFamilies(t, mfs)
	id := ctr["id"]
	before := cgroupCPUOf(t, id)
	mfs = parseScrape(t, cn.proxyGet(t, "metrics/cadvisor"))
	limit := seriesValue(t, mfs, "container_spec_memory_limit_bytes", ctr)
	if want := cgroupFile(t, "memory", id, cgroupMemLimitFile()); strconv.FormatFloat(limit, 'f', -1, 64) != want || limit != 48<<20 {
		t.Errorf("memory limit %v, cgroup %s, spec 48Mi", limit, want)
	}
	if q := seriesValue(t, mfs, "container_spec_cpu_quota", ctr); q != 10000 {
		t.Errorf("cpu quota %v, want 10000 (100m of a 100 ms period)", q)
	}
	after := cgroupCPUOf(t, id)
	// The sample is at most one period (10 s) old: at 100m, 1 s of CPU.
	if got := seriesValue(t, mfs, "container_cpu_usage_seconds_total", with(ctr, "cpu", "total")); got > float64(after)/1e9+0.01 || got < float64(before)/1e9-1.5 {
		t.Errorf("cpu usage %v s, cgroup %v s before and %v s after the scrape", got, float64(before)/1e9, float64(after)/1e9)
	}
	if ws := seriesValue(t, mfs, "container_memory_working_set_bytes", ctr); ws <= 0 || ws > 48<<20 {
		t.Errorf("working set %v", ws)
	}
	podCg := findSeries(mfs, "container_spec_memory_limit_bytes", map[string]string{"namespace": cn.ns, "pod": pod.Name, "container": "", "image": ""})
	if podCg == nil || podCg["id"] != path.Dir(id) || !strings.Contains(path.Base(podCg["id"]), "pod") {
		t.Errorf("pod cgroup series %v, want the parent of %s", podCg, id)
	} else if l := seriesValue(t, mfs, "container_spec_memory_limit_bytes", podCg); l != 48<<20 {
		t.Errorf("pod cgroup memory limit %v", l)
	}
	sb := findSeries(mfs, "container_network_receive_bytes_total", map[string]string{"namespace": cn.ns, "pod": pod.Name, "interface": "eth0"})
	if sb == nil || sb["container"] != "" || sb["image"] == "" || path.Dir(sb["id"]) != path.Dir(id) {
		t.Errorf("sandbox network series %v", sb)
	}
	checkAgreesWithSummary(t, cn, pod.Name)
}

// checkFamilies compares the families with upstream's: each one is
// upstream's, and each of upstream's is there but disk I/O.
func checkFamilies(t *testing.T, mfs map[string]*dto.MetricFamily) {
	t.Helper()
	b, err := os.ReadFile(cadvisorUpstream)
	must(t, err)
	want := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, _, _ := strings.Cut(sc.Text(), "\t")
		want[name] = sc.Text()
	}
	for name, mf := range mfs {
		if got := signature(mf); got != want[name] {
			t.Errorf("family\n got  %q\n want %q", got, want[name])
		}
	}
	for name := range want {
		if mfs[name] == nil && !cadvisorOptional[name] {
			t.Errorf("family %s missing", name)
		}
	}
}

func signature(mf *dto.MetricFamily) string {
	labels := map[string]bool{}
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = true
		}
	}
	var names []string
	for l := range labels {
		names = append(names, l)
	}
	sort.Strings(names)
	return strings.Join([]string{mf.GetName(), strings.ToLower(mf.GetType().String()), strings.Join(names, ","), mf.GetHelp()}, "\t")
}

// checkAgreesWithSummary reads the container's CPU and working set from
// /stats/summary and /metrics/cadvisor until both come from one sample
// (same time), and then they must be equal.
func checkAgreesWithSummary(t *testing.T, cn *clusterNode, pod string) {
	t.Helper()
	waitFor(t, 40*time.Second, "a summary and a scrape of the same sample", func() (bool, error) {
		var s statsapi.Summary
		must(t, json.Unmarshal(cn.proxyGet(t, "stats/summary"), &s))
		mfs := parseScrape(t, cn.proxyGet(t, "metrics/cadvisor"))
		ps := podStats(&s, pod)
		if ps == nil || len(ps.Containers) != 1 || ps.Containers[0].CPU == nil || ps.Containers[0].Memory == nil {
			return false, nil
		}
		c := ps.Containers[0]
		sel := map[string]string{"namespace": cn.ns, "pod": pod, "container": "main"}
		cpu := findMetric(mfs, "container_cpu_usage_seconds_total", sel)
		ws := findMetric(mfs, "container_memory_working_set_bytes", sel)
		// The summary's times have whole seconds; samples are 10 s apart.
		if cpu == nil || ws == nil || cpu.GetTimestampMs()/1000 != c.CPU.Time.Unix() {
			return false, nil // a new sample between the two requests
		}
		if got, want := cpu.GetCounter().GetValue(), float64(val(c.CPU.UsageCoreNanoSeconds))/1e9; math.Abs(got-want) > 1e-9 {
			t.Errorf("cpu: metrics %v s, summary %v s", got, want)
		}
		if got, want := ws.GetGauge().GetValue(), float64(val(c.Memory.WorkingSetBytes)); got != want {
			t.Errorf("working set: metrics %v, summary %v", got, want)
		}
		return true, nil
	})
}

func parseScrape(t *testing.T, b []byte) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := parseMetrics(bytes.NewReader(b))
	must(t, err)
	return mfs
}

func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func findMetric(mfs map[string]*dto.MetricFamily, family string, want map[string]string) *dto.Metric {
	if ms := series(mfs, family, want); len(ms) > 0 {
		return ms[0]
	}
	return nil
}

// findSeries is the labels of the first series of family matching want.
func findSeries(mfs map[string]*dto.MetricFamily, family string, want map[string]string) map[string]string {
	if m := findMetric(mfs, family, want); m != nil {
		return labelsOf(m)
	}
	return nil
}

func seriesValue(t *testing.T, mfs map[string]*dto.MetricFamily, family string, labels map[string]string) float64 {
	t.Helper()
	m := findMetric(mfs, family, labels)
	if m == nil {
		t.Fatalf("no %s%v", family, labels)
	}
	return m.GetGauge().GetValue() + m.GetCounter().GetValue()
}

func with(m map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for a, b := range m {
		out[a] = b
	}
	return out
}

func cgroupMemLimitFile() string {
	if _, err := os.Stat(cgroupMount + "/cgroup.controllers"); err == nil {
		return "memory.max"
	}
	return "memory.limit_in_bytes"
}

// cgroupCPUOf reads a cgroup's CPU time in nanoseconds.
func cgroupCPUOf(t *testing.T, cg string) uint64 {
	t.Helper()
	if _, err := os.Stat(cgroupMount + "/cgroup.controllers"); err == nil {
		for _, line := range strings.Split(cgroupFile(t, "cpu", cg, "cpu.stat"), "\n") {
			if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
				n, _ := strconv.ParseUint(v, 10, 64)
				return n * 1000
			}
		}
		return 0
	}
	n, _ := strconv.ParseUint(cgroupFile(t, "cpuacct", cg, "cpuacct.usage"), 10, 64)
	return n
}
