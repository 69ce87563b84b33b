package main

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// criOpsMetric counts a kubelet's CRI calls by operation_type; Skiff and
// the upstream kubelet export it under the same name and labels.
const criOpsMetric = "kubelet_runtime_operations_total"

// Each CRI operation_type is counted as a read (it only asks the runtime
// something), a write (it changes the runtime's state) or other (exec and
// streaming: they run something in a container; get_container_events,
// which opens an event stream, is other too). A name in neither list is
// other, and shows in the breakdown under its own name.
const (
	criRead  = "read"
	criWrite = "write"
	criOther = "other"
)

// criStateReads are the reads a kubelet makes to learn its pods' state:
// what a PLEG relist and a pod status read cost.
var criStateReads = []string{"list_podsandbox", "podsandbox_status", "list_containers", "container_status"}

var criReads = append([]string{
	"version", "status", "runtime_config",
	"list_images", "image_status", "image_fs_info",
	"container_stats", "list_container_stats", "podsandbox_stats", "list_podsandbox_stats",
	"list_metric_descriptors", "list_podsandbox_metrics",
}, criStateReads...)

var criWrites = []string{
	"run_podsandbox", "stop_podsandbox", "remove_podsandbox",
	"create_container", "start_container", "stop_container", "remove_container",
	"update_container", "update_podsandbox_resources", "update_runtime_config",
	"reopen_container_log", "checkpoint_container", "pull_image", "remove_image",
}

// criClass says how an operation_type is counted.
func criClass(op string) string {
	switch {
	case slices.Contains(criReads, op):
		return criRead
	case slices.Contains(criWrites, op):
		return criWrite
	}
	return criOther
}

// criOps is a kubelet's kubelet_runtime_operations_total at one moment,
// by operation_type.
type criOps map[string]float64

// criScrape is one scrape of a kubelet's CRI metrics: the operation
// counts, and the seconds ExecSync took in all (execSeconds, from
// criDurationMetric's sum) over execs calls.
type criScrape struct {
	ops                criOps
	execSeconds, execs float64
}

// criDurationMetric times a kubelet's CRI calls by operation_type, under
// the same name and labels in Skiff and upstream.
const criDurationMetric = "kubelet_runtime_operations_duration_seconds"

// parseCRIOps reads kubelet_runtime_operations_total, and ExecSync's
// durations, out of a Prometheus text exposition. A kubelet that has made
// no CRI call yet has no series: an empty map, not an error.
func parseCRIOps(exposition []byte) (criScrape, error) {
	var p expfmt.TextParser
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(exposition))
	if err != nil {
		return criScrape{}, fmt.Errorf("parsing /metrics: %w", err)
	}
	sc := criScrape{ops: criOps{}}
	for _, m := range mfs[criOpsMetric].GetMetric() {
		if op, ok := opLabel(m.GetLabel()); ok {
			sc.ops[op] += m.GetCounter().GetValue()
		}
	}
	for _, m := range mfs[criDurationMetric].GetMetric() {
		if op, _ := opLabel(m.GetLabel()); op == "exec_sync" {
			sc.execSeconds += m.GetHistogram().GetSampleSum()
			sc.execs += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sc, nil
}

func opLabel(labels []*dto.LabelPair) (string, bool) {
	for _, l := range labels {
		if l.GetName() == "operation_type" {
			return l.GetValue(), true
		}
	}
	return "", false
}

// execMeanMs is the mean ExecSync took between two scrapes, in ms; NaN
// when no exec ran between them.
func execMeanMs(before, after criScrape) float64 {
	n := after.execs - before.execs
	if n <= 0 {
		return math.NaN()
	}
	return (after.execSeconds - before.execSeconds) / n * 1000
}

// criPerPod is a kubelet's CRI operations over a workload's pod starts,
// per pod: from just before the first create to the last pod Ready (the
// churn loop: to its end, deletions included). The kubelet's periodic
// calls over that window (relists, runtime status, stats) are in it.
type criPerPod struct {
	Reads      float64 `json:"reads"`
	StateReads float64 `json:"stateReads"` // of Reads: criStateReads
	Writes     float64 `json:"writes"`
	Other      float64 `json:"other"`
	// ExecMs is the mean time an ExecSync took (the exec probes), in ms.
	ExecMs float64 `json:"execMs,omitempty"`
	// ByOp holds each operation_type that moved.
	ByOp map[string]float64 `json:"byOp"`
}

// criDelta is what moved between two scrapes, per pod; nil when either
// scrape is missing or there were no pods. A counter that went down (the
// kubelet restarted) makes the whole delta meaningless: nil as well.
func criDelta(before, after criOps, pods int) *criPerPod {
	if before == nil || after == nil || pods <= 0 {
		return nil
	}
	c := &criPerPod{ByOp: map[string]float64{}}
	for op, v := range after {
		d := v - before[op]
		if d < 0 {
			return nil
		}
		if d == 0 {
			continue
		}
		per := d / float64(pods)
		c.ByOp[op] = per
		switch criClass(op) {
		case criRead:
			c.Reads += per
			if slices.Contains(criStateReads, op) {
				c.StateReads += per
			}
		case criWrite:
			c.Writes += per
		default:
			c.Other += per
		}
	}
	for op := range before {
		if _, ok := after[op]; !ok {
			return nil // a series vanished: not the same process
		}
	}
	return c
}

// scrapeCRIOps reads a kubelet's CRI metrics from its /metrics through
// the apiserver's node proxy (the path heapProfile uses), or says why not
// and returns a scrape with no counts.
func (b *bench) scrapeCRIOps(ctx context.Context, kind string) criScrape {
	raw, err := b.nodeProxy("metrics").DoRaw(ctx)
	if err == nil {
		var sc criScrape
		if sc, err = parseCRIOps(raw); err == nil {
			return sc
		}
	}
	fmt.Printf("  CRI operations of %s: %v\n", kind, err)
	return criScrape{}
}

// criOver is criDelta of two scrapes, with ExecSync's mean time.
func criOver(before, after criScrape, pods int) *criPerPod {
	c := criDelta(before.ops, after.ops, pods)
	if c != nil {
		c.ExecMs = execMeanMs(before, after)
	}
	return c
}

// criMetrics are the table's CRI rows of a pod-starting workload; exec
// and other calls are in the breakdown below the table (criTable).
func criMetrics(w string) []metric {
	per := "per pod start"
	if w == "d" {
		per = "per pod, create→gone"
	}
	get := func(f func(*criPerPod) float64) func([]*workloadResult) float64 {
		return func(runs []*workloadResult) float64 { return criMedian(runs, f) }
	}
	ms := []metric{
		{"CRI reads " + per, get(criReadsOf)},
		{"  of which pod and container state", get(func(c *criPerPod) float64 { return c.StateReads })},
		{"CRI writes " + per, get(func(c *criPerPod) float64 { return c.Writes })},
	}
	if w == "c" { // the exec probes
		ms = append(ms, metric{"ExecSync mean (ms)", get(func(c *criPerPod) float64 { return c.ExecMs })})
	}
	return ms
}

// criMedian is the median over the rounds that have CRI counts (NaN when
// none has).
func criMedian(runs []*workloadResult, f func(*criPerPod) float64) float64 {
	var v []float64
	for _, x := range runs {
		if x.CRI != nil {
			v = append(v, f(x.CRI))
		}
	}
	return median(v)
}

// criTable shows each CRI operation per pod (median over rounds) in one
// table: a row per operation that moved, reads first, and a column per
// workload and kubelet.
func (r *results) criTable() string {
	var ws []string
	ops := map[string]bool{}
	for _, w := range r.order {
		s, u := r.pick(w, skiff), r.pick(w, upstream)
		if len(s) == 0 || len(u) == 0 || math.IsNaN(criMedian(s, criReadsOf)) && math.IsNaN(criMedian(u, criReadsOf)) {
			continue
		}
		ws = append(ws, w)
		for _, x := range append(append([]*workloadResult(nil), s...), u...) {
			if x.CRI != nil {
				for op := range x.CRI.ByOp {
					ops[op] = true
				}
			}
		}
	}
	if len(ws) == 0 {
		return ""
	}
	rank := map[string]int{criRead: 0, criWrite: 1, criOther: 2}
	sorted := slices.SortedFunc(maps.Keys(ops), func(a, b string) int {
		if d := rank[criClass(a)] - rank[criClass(b)]; d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	var b strings.Builder
	b.WriteString("| operation | counted as |")
	for _, w := range ws {
		fmt.Fprintf(&b, " %s Skiff | %s upstream |", w, w)
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---:|---:|", len(ws)) + "\n")
	for _, op := range sorted {
		fmt.Fprintf(&b, "| %s | %s |", op, criClass(op))
		get := func(c *criPerPod) float64 { return c.ByOp[op] }
		for _, w := range ws {
			fmt.Fprintf(&b, " %s | %s |", num(criMedian(r.pick(w, skiff), get)), num(criMedian(r.pick(w, upstream), get)))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func criReadsOf(c *criPerPod) float64 { return c.Reads }
