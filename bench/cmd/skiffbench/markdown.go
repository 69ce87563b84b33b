package main

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// markdown renders the results: the machine, the table, Skiff's start-up
// breakdown and the node's API requests by kind.
func (r *results) markdown() string {
	var b strings.Builder
	m := r.Machine
	fmt.Fprintf(&b, "## Skiff vs upstream kubelet v1.34.4 on %s — %s\n\n", r.Machine.Runtime, r.Date)
	fmt.Fprintf(&b, "Machine: %s, %d CPUs (%s), %s memory, kernel %s; load average at start %s, at end %s.\n",
		m.Hostname, m.CPUs, m.CPUModel, m.MemoryGB, m.Kernel, m.LoadStart, m.LoadEnd)
	fmt.Fprintf(&b, "Container runtime (every figure below): %s.\n", r.Machine.Runtime)
	fmt.Fprintf(&b, "Options: %s.\n", formatOptions(r.Options))
	if r.Note != "" {
		fmt.Fprintf(&b, "Note: %s\n", r.Note)
	}
	b.WriteString("\nPer-pod times are pooled over the rounds; makespans, memory, CPU and requests are medians of the rounds. Ratio = Skiff / upstream (lower is better for every row). Runtime limit = the same batch driven straight through CRI with no kubelet (RunPodSandbox, CreateContainer, StartContainer with the configs Skiff sends; Ready = StartContainer returned), in the same rounds; × limit = the kubelet's figure / that limit.\n\n")
	b.WriteString("| workload | metric | Skiff | upstream | ratio | runtime limit | Skiff × limit | upstream × limit |\n|---|---|---:|---:|---:|---:|---:|---:|\n")
	var notes []string
	for _, row := range r.Rows {
		ratio := "—"
		if !math.IsNaN(float64(row.Ratio)) {
			ratio = fmt.Sprintf("%.2f", float64(row.Ratio))
		}
		if row.Note != "" {
			ratio = "n/c"
			if !contains(notes, row.Section+": "+row.Note) {
				notes = append(notes, row.Section+": "+row.Note)
			}
		}
		lim := float64(row.Runtime)
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", row.Section, row.Metric, num(float64(row.Skiff)), num(float64(row.Upstream)), ratio,
			num(lim), times(float64(row.Skiff), lim), times(float64(row.Upstream), lim))
	}
	for _, n := range notes {
		fmt.Fprintf(&b, "\nn/c — %s\n", n)
	}
	if q := r.quietLine(); q != "" {
		fmt.Fprintf(&b, "\nMachine idle before each workload (wait for ≥ %s idle over 5 s): %s.\n", r.Options["quietIdle"], q)
	}
	if bd := r.breakdownTable(); bd != "" {
		b.WriteString("\n### Skiff's pod start-up breakdown\n")
		b.WriteString(bd)
	}
	if ct := r.criTable(); ct != "" {
		b.WriteString("\n### CRI operations per pod by type (median over rounds)\n\n")
		b.WriteString("Each kubelet's kubelet_runtime_operations_total from just before the first create to the last pod Ready (d: to the end of its loop, deletions included), its periodic calls in that window included. Reads: " +
			strings.Join(criReads, ", ") + "; writes: " + strings.Join(criWrites, ", ") + "; the rest (exec_sync, ...): other.\n\n")
		b.WriteString(ct)
	}
	b.WriteString("\n### API requests per pod by kind (median over rounds)\n\n")
	b.WriteString(r.requestTable())
	return b.String()
}

// times is v as a multiple of limit ("—" without a limit).
func times(v, limit float64) string {
	if math.IsNaN(v) || math.IsNaN(limit) || limit <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", v/limit)
}

func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "—"
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func formatOptions(o map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(o)) {
		parts = append(parts, k+"="+o[k])
	}
	return strings.Join(parts, ", ")
}

// requestTable shows, per workload, each kind of request per pod for both
// kubelets (Skiff's PodStartupBreakdown event creates left out).
func (r *results) requestTable() string {
	var b strings.Builder
	for _, w := range r.order {
		s, u := r.pick(w, skiff), r.pick(w, upstream)
		if len(s) == 0 || len(u) == 0 {
			continue
		}
		kinds := map[string]bool{}
		for _, x := range append(append([]*workloadResult(nil), s...), u...) {
			for k := range x.Requests {
				kinds[k] = true
			}
		}
		perPod := func(runs []*workloadResult, k string) float64 {
			var v []float64
			for _, x := range runs {
				n := x.Requests[k]
				if k == "create events" && x.Kubelet == skiff {
					n -= x.BreakdownEvents
				}
				if x.Pods > 0 {
					v = append(v, float64(n)/float64(x.Pods))
				}
			}
			return median(v)
		}
		fmt.Fprintf(&b, "%s:\n\n| request | Skiff | upstream |\n|---|---:|---:|\n", s[0].Name)
		for _, k := range slices.Sorted(maps.Keys(kinds)) {
			fmt.Fprintf(&b, "| %s | %.2f | %.2f |\n", k, perPod(s, k), perPod(u, k))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// quietLine lists, per run, the machine's idle share when the workload
// began and how long skiffbench waited for it.
func (r *results) quietLine() string {
	var parts []string
	for _, w := range r.order {
		for _, k := range []string{skiff, upstream} {
			for _, x := range r.pick(w, k) {
				if x.QuietWaitSeconds > 0 {
					parts = append(parts, fmt.Sprintf("%s %s r%d %.0f%% (%.0f s)", w, k, x.Round, 100*x.IdleAtStart, x.QuietWaitSeconds))
				}
			}
		}
	}
	return strings.Join(parts, ", ")
}
