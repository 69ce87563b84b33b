package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	for _, tt := range []struct {
		p    float64
		want float64
	}{{50, 5}, {90, 9}, {99, 10}, {100, 10}, {0, 1}, {10, 1}, {11, 2}} {
		if got := percentile(xs, tt.p); got != tt.want {
			t.Errorf("p%v = %v, want %v", tt.p, got, tt.want)
		}
	}
	if !math.IsNaN(percentile(nil, 50)) {
		t.Error("percentile of nothing should be NaN")
	}
	if xs[0] != 5 {
		t.Error("percentile sorted its input in place")
	}
}

func TestParseProc(t *testing.T) {
	status := "Name:\tkubelet\nVmPeak:\t  900 kB\nVmRSS:\t   81920 kB\nRssAnon:\t 100 kB\n"
	if kb, err := parseStatusKB(status, "VmRSS"); err != nil || kb != 81920 {
		t.Errorf("VmRSS = %d, %v", kb, err)
	}
	if kb, err := parseStatusKB(status, "RssAnon"); err != nil || kb != 100 {
		t.Errorf("RssAnon = %d, %v", kb, err)
	}
	if _, err := parseStatusKB("Name: x\n", "VmRSS"); err == nil {
		t.Error("no VmRSS: no error")
	}
	// The command name may hold spaces and parentheses.
	stat := "1234 (my (odd) cmd) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 130 0 0 20 0 12 0 100 0 0"
	if cpu, err := parseCPU(stat); err != nil || cpu != 3.8 {
		t.Errorf("parseCPU = %v, %v; want 3.8 (250+130 ticks)", cpu, err)
	}
	if _, err := parseCPU("1234 (x) S 1 2"); err == nil {
		t.Error("parseCPU of a short line: no error")
	}
}

func TestSummarize(t *testing.T) {
	t0 := time.Unix(1000, 0)
	u := summarize([]procSample{
		{at: t0, rssKB: 100 * 1024, cpuSec: 10},
		{at: t0.Add(time.Second), rssKB: 300 * 1024, cpuSec: 10.5},
		{at: t0.Add(2 * time.Second), rssKB: 200 * 1024, cpuSec: 11},
	})
	if u.PeakRSSMB != 300 || u.MedianRSSMB != 200 || u.CPUSeconds != 1 || u.Seconds != 2 || u.CPUPercent != 50 {
		t.Errorf("summarize = %+v", u)
	}
	if (summarize(nil) != usage{}) {
		t.Error("summarize of nothing should be zero")
	}
}

func TestCountRequests(t *testing.T) {
	log := `{"verb":"get","user":{"username":"system:node:bench-node"},"objectRef":{"resource":"pods"}}
{"verb":"patch","user":{"username":"system:node:bench-node"},"objectRef":{"resource":"pods","subresource":"status"}}
{"verb":"patch","user":{"username":"system:node:bench-node"},"objectRef":{"resource":"pods","subresource":"status"}}
{"verb":"create","user":{"username":"system:node:other"},"objectRef":{"resource":"events"}}
{"verb":"get","user":{"username":"system:node:bench-node"}}
{"verb":"create","user":{"username":"system:node:bench-node"},"objec`
	counts, n, err := countRequests(strings.NewReader(log), "system:node:bench-node")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"get pods": 1, "patch pods/status": 2, "get (non-resource)": 1}
	if len(counts) != len(want) {
		t.Errorf("counts = %v, want %v", counts, want)
	}
	for k, v := range want {
		if counts[k] != v {
			t.Errorf("%s = %d, want %d", k, counts[k], v)
		}
	}
	if counts.total() != 4 {
		t.Errorf("total = %d", counts.total())
	}
	// The partial last line is left for the next read.
	if want := int64(strings.LastIndex(log, "\n") + 1); n != want {
		t.Errorf("consumed %d bytes, want %d", n, want)
	}
	if k := counts.keys(); k[0] != "patch pods/status" {
		t.Errorf("keys not largest first: %v", k)
	}
}

func TestRowsAndRatios(t *testing.T) {
	r := newResults(options{rounds: 1, workloads: "a,c"})
	r.add(&workloadResult{Workload: "a", Name: "a: batch of 2", Kubelet: skiff, Round: 1, Pods: 2,
		Ready: []float64{1, 2}, ReadyMakespan: 2, Requests: requestCounts{"patch pods/status": 6, "create events": 2}, BreakdownEvents: 2})
	r.add(&workloadResult{Workload: "a", Name: "a: batch of 2", Kubelet: upstream, Round: 1, Pods: 2,
		Ready: []float64{2, 4}, ReadyMakespan: 4, Requests: requestCounts{"patch pods/status": 8}})
	r.add(&workloadResult{Workload: "c", Name: "c", Kubelet: skiff, Round: 1, Pods: 2, Ready: []float64{1}, NotComparable: "probes not run"})
	r.add(&workloadResult{Workload: "c", Name: "c", Kubelet: upstream, Round: 1, Pods: 2, Ready: []float64{3},
		QuietWaitSeconds: 35, IdleAtStart: 0.83})
	r.computeRows()
	find := func(section, metric string) row { return findRow(t, r.Rows, section, metric) }
	if x := find("a: batch of 2", "create→Ready p99 (s)"); x.Skiff != 2 || x.Upstream != 4 || x.Ratio != 0.5 {
		t.Errorf("p99 row = %+v", x)
	}
	// Breakdown event creates are not counted against Skiff.
	if x := find("a: batch of 2", "API requests per pod"); x.Skiff != 3 || x.Upstream != 4 {
		t.Errorf("requests row = %+v", x)
	}
	if x := find("c", "create→Ready p50 (s)"); !math.IsNaN(float64(x.Ratio)) || !strings.Contains(x.Note, "probes not run") {
		t.Errorf("a not comparable row has a ratio: %+v", x)
	}
	if b, err := json.Marshal(r); err != nil || !strings.Contains(string(b), `"ratio":null`) {
		t.Errorf("JSON: %v (a NaN ratio must be null)", err)
	}
	md := r.markdown()
	for _, want := range []string{"| a: batch of 2 | create→Ready p99 (s) | 2.00 | 4.00 | 0.50 |", "n/c — c: not comparable (skiff, round 1): probes not run", "c upstream r1 83% (35 s)"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

// findRow is the table's row of a metric, or fails the test.
func findRow(t *testing.T, rows []row, section, metric string) row {
	t.Helper()
	for _, x := range rows {
		if x.Section == section && x.Metric == metric {
			return x
		}
	}
	t.Fatalf("no row %s / %s", section, metric)
	return row{}
}

func TestParseProcStat(t *testing.T) {
	stat := "cpu  100 5 50 800 40 3 2 0 7 1\ncpu0 50 2 25 400 20 1 1 0 0 0\nintr 1 2 3\n"
	got, err := parseProcStat([]byte(stat))
	if err != nil {
		t.Fatal(err)
	}
	// user..steal (guest fields are already in user/nice); idle + iowait.
	if want := (cpuTimes{idle: 840, total: 1000}); got != want {
		t.Errorf("parseProcStat = %+v, want %+v", got, want)
	}
	if _, err := parseProcStat([]byte("intr 1\n")); err == nil {
		t.Error("no cpu line: no error")
	}
	if f := idleFraction(cpuTimes{idle: 840, total: 1000}, cpuTimes{idle: 1020, total: 1200}); f != 0.9 {
		t.Errorf("idleFraction = %v, want 0.9", f)
	}
	if f := idleFraction(got, got); f != 1 {
		t.Errorf("idleFraction over no time = %v, want 1", f)
	}
}

// The bare-CRI batch fills the runtime limit of the time rows of its
// workload, and the table shows each kubelet as a multiple of it.
func TestRuntimeLimitColumn(t *testing.T) {
	r := newResults(options{workloads: "b"})
	for kind, ms := range map[string]float64{skiff: 66, upstream: 72, bare: 60} {
		r.add(&workloadResult{Workload: "b", Name: "b: batch of 100", Kubelet: kind, Round: 1, Pods: 1,
			Ready: []float64{ms}, ReadyMakespan: ms})
	}
	r.computeRows()
	var found bool
	for _, row := range r.Rows {
		switch {
		case row.Metric == "makespan to all Ready (s)":
			found = true
			if row.Runtime != 60 {
				t.Errorf("runtime limit of the makespan = %v, want 60", row.Runtime)
			}
		case strings.HasPrefix(row.Metric, "peak RSS") && !math.IsNaN(float64(row.Runtime)):
			t.Errorf("%s has a runtime limit %v; only times do", row.Metric, row.Runtime)
		}
	}
	if !found {
		t.Fatal("no makespan row")
	}
	if md := r.markdown(); !strings.Contains(md, "| 66.0 | 72.0 | 0.92 | 60.0 | 1.10× | 1.20× |") {
		t.Errorf("the makespan row does not show the runtime limit and the multiples:\n%s", md)
	}
}
