package main

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// exposition is a kubelet's /metrics with the given runtime operation
// counts, among other families (the duration histogram of the same
// operations included, which must not be counted).
func exposition(ops map[string]float64) []byte {
	var b strings.Builder
	b.WriteString("# HELP go_goroutines Number of goroutines that currently exist.\n# TYPE go_goroutines gauge\ngo_goroutines 120\n")
	b.WriteString("# HELP kubelet_runtime_operations_duration_seconds [ALPHA] Duration in seconds of runtime operations.\n# TYPE kubelet_runtime_operations_duration_seconds histogram\n")
	b.WriteString("kubelet_runtime_operations_duration_seconds_bucket{operation_type=\"container_status\",le=\"+Inf\"} 999\n")
	b.WriteString("kubelet_runtime_operations_duration_seconds_sum{operation_type=\"container_status\"} 1.5\n")
	b.WriteString("kubelet_runtime_operations_duration_seconds_count{operation_type=\"container_status\"} 999\n")
	b.WriteString("# HELP kubelet_runtime_operations_total [ALPHA] Cumulative number of runtime operations by operation type.\n# TYPE kubelet_runtime_operations_total counter\n")
	for op, v := range ops {
		fmt.Fprintf(&b, "kubelet_runtime_operations_total{operation_type=%q} %g\n", op, v)
	}
	b.WriteString("# HELP kubelet_running_pods [ALPHA] Number of pods.\n# TYPE kubelet_running_pods gauge\nkubelet_running_pods 30\n")
	return []byte(b.String())
}

func TestParseCRIOps(t *testing.T) {
	want := map[string]float64{"list_podsandbox": 40, "container_status": 7, "run_podsandbox": 2, "exec_sync": 1e6}
	sc, err := parseCRIOps(exposition(want))
	if err != nil {
		t.Fatal(err)
	}
	got := sc.ops
	if len(got) != len(want) {
		t.Errorf("parseCRIOps = %v, want %v", got, want)
	}
	for op, v := range want {
		if got[op] != v {
			t.Errorf("%s = %v, want %v", op, got[op], v)
		}
	}
	// A kubelet that has made no CRI call yet: no series, no error.
	if got, err := parseCRIOps([]byte("go_goroutines 3\n")); err != nil || got.ops == nil || len(got.ops) != 0 {
		t.Errorf("no series: %v, %v; want an empty map", got, err)
	}
	if _, err := parseCRIOps([]byte("kubelet_runtime_operations_total{operation_type=\"status\" 3\n")); err == nil {
		t.Error("a malformed exposition parsed")
	}
}

// The delta of two scrapes is split into reads, state reads, writes and
// other, per pod, from the metric text.
func TestCRIDeltaFromMetricText(t *testing.T) {
	scrape := func(ops map[string]float64) criOps {
		t.Helper()
		c, err := parseCRIOps(exposition(ops))
		if err != nil {
			t.Fatal(err)
		}
		return c.ops
	}
	before := scrape(map[string]float64{
		"version": 3, "status": 10, "list_podsandbox": 100, "list_containers": 100, "image_status": 1,
		"run_podsandbox": 1, "stop_podsandbox": 5,
	})
	after := scrape(map[string]float64{
		"version": 3, "status": 14, "list_podsandbox": 120, "list_containers": 120, "image_status": 11,
		"podsandbox_status": 20, "container_status": 30, "list_podsandbox_stats": 2,
		"run_podsandbox": 11, "create_container": 10, "start_container": 10, "stop_podsandbox": 5,
		"exec_sync": 50, "some_future_call": 4,
	})
	c := criDelta(before, after, 10)
	if c == nil {
		t.Fatal("no delta")
	}
	// Reads: status 4, lists 20+20, image_status 10, sandbox and container
	// status 20+30, stats 2 = 106 over 10 pods; of them state 90.
	check := map[string][2]float64{
		"reads": {c.Reads, 10.6}, "state reads": {c.StateReads, 9}, "writes": {c.Writes, 3}, "other": {c.Other, 5.4},
	}
	for name, v := range check {
		if math.Abs(v[0]-v[1]) > 1e-9 {
			t.Errorf("%s per pod = %v, want %v", name, v[0], v[1])
		}
	}
	if _, ok := c.ByOp["version"]; ok {
		t.Error("an operation that did not move is in the breakdown")
	}
	if c.ByOp["container_status"] != 3 || c.ByOp["some_future_call"] != 0.4 {
		t.Errorf("breakdown = %v", c.ByOp)
	}

	// Nothing to say without both scrapes, without pods, or across a
	// kubelet restart (a counter that went down or vanished).
	restarted := scrape(map[string]float64{"list_podsandbox": 5, "list_containers": 5, "status": 1})
	for name, d := range map[string]*criPerPod{
		"no before":       criDelta(nil, after, 10),
		"no after":        criDelta(before, nil, 10),
		"no pods":         criDelta(before, after, 0),
		"counter down":    criDelta(before, restarted, 10),
		"series vanished": criDelta(after, scrape(map[string]float64{"version": 9, "status": 99}), 10),
	} {
		if d != nil {
			t.Errorf("%s: delta %+v, want none", name, d)
		}
	}
}

// ExecSync's mean time comes from the duration histogram's sum and count
// between two scrapes; other operations' durations do not count.
func TestExecMeanFromMetricText(t *testing.T) {
	hist := func(execSum float64, execs int) criScrape {
		t.Helper()
		text := fmt.Sprintf(`# TYPE kubelet_runtime_operations_duration_seconds histogram
kubelet_runtime_operations_duration_seconds_bucket{operation_type="exec_sync",le="+Inf"} %[2]d
kubelet_runtime_operations_duration_seconds_sum{operation_type="exec_sync"} %[1]g
kubelet_runtime_operations_duration_seconds_count{operation_type="exec_sync"} %[2]d
kubelet_runtime_operations_duration_seconds_bucket{operation_type="list_containers",le="+Inf"} 1000
kubelet_runtime_operations_duration_seconds_sum{operation_type="list_containers"} 99
kubelet_runtime_operations_duration_seconds_count{operation_type="list_containers"} 1000
`, execSum, execs)
		sc, err := parseCRIOps([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		return sc
	}
	before, after := hist(1.5, 10), hist(31.5, 110)
	if got := execMeanMs(before, after); math.Abs(got-300) > 1e-9 {
		t.Errorf("exec mean = %v ms, want 300", got)
	}
	if got := execMeanMs(after, after); !math.IsNaN(got) {
		t.Errorf("no exec between the scrapes: %v, want NaN", got)
	}
}

func TestCRIClass(t *testing.T) {
	for op, want := range map[string]string{
		"list_podsandbox": criRead, "container_status": criRead, "status": criRead, "image_fs_info": criRead,
		"run_podsandbox": criWrite, "start_container": criWrite, "pull_image": criWrite,
		"exec_sync": criOther, "port_forward": criOther, "not_a_cri_call": criOther,
	} {
		if got := criClass(op); got != want {
			t.Errorf("criClass(%s) = %s, want %s", op, got, want)
		}
	}
}

// The CRI rows are medians over rounds, a run without counts is left out,
// and the breakdown below the table lists reads before writes, a column
// per workload and kubelet.
func TestCRIRowsAndTable(t *testing.T) {
	r := newResults(options{workloads: "a,d"})
	add := func(w, kind string, round int, c *criPerPod) {
		r.add(&workloadResult{Workload: w, Name: w + ": x", Kubelet: kind, Round: round, Pods: 10, CRI: c})
	}
	add("a", skiff, 1, &criPerPod{Reads: 4, StateReads: 3, Writes: 3, ByOp: map[string]float64{"container_status": 1, "run_podsandbox": 1}})
	add("a", skiff, 2, &criPerPod{Reads: 6, StateReads: 5, Writes: 3, ByOp: map[string]float64{"container_status": 3, "run_podsandbox": 1}})
	add("a", skiff, 3, nil) // its scrape failed
	add("a", upstream, 1, &criPerPod{Reads: 12, StateReads: 10, Writes: 3, ByOp: map[string]float64{"container_status": 4, "run_podsandbox": 1}})
	add("d", skiff, 1, &criPerPod{Reads: 20, Writes: 7, ByOp: map[string]float64{"list_containers": 2}})
	add("d", upstream, 1, &criPerPod{Reads: 40, Writes: 7, ByOp: map[string]float64{"list_containers": 5}})
	r.computeRows()
	find := func(section, metric string) row { return findRow(t, r.Rows, section, metric) }
	// Skiff's rounds 4 and 6: the nearest-rank median is 4.
	if x := find("a: x", "CRI reads per pod start"); x.Skiff != 4 || x.Upstream != 12 || math.Abs(float64(x.Ratio)-1.0/3) > 1e-9 {
		t.Errorf("reads row = %+v", x)
	}
	if x := find("a: x", "  of which pod and container state"); x.Skiff != 3 || x.Upstream != 10 {
		t.Errorf("state reads row = %+v", x)
	}
	if x := find("a: x", "CRI writes per pod start"); x.Skiff != 3 || x.Upstream != 3 {
		t.Errorf("writes row = %+v", x)
	}
	if x := find("d: x", "CRI reads per pod, create→gone"); x.Skiff != 20 || x.Upstream != 40 {
		t.Errorf("churn reads row = %+v", x)
	}
	md := r.markdown()
	for _, want := range []string{
		"| a: x | CRI reads per pod start | 4.00 | 12.0 | 0.33 |",
		"| operation | counted as | a Skiff | a upstream | d Skiff | d upstream |",
		"| container_status | read | 1.00 | 4.00 | 0.00 | 0.00 |\n| list_containers | read | 0.00 | 0.00 | 2.00 | 5.00 |\n| run_podsandbox | write | 1.00 | 1.00 | 0.00 | 0.00 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}
