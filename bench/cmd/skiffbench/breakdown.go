package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/internal/podstartup"
)

// breakdown collects Skiff's PodStartupBreakdown events in ns: seconds per
// phase (container phases summed per pod), "total" for first seen → Ready.
func (b *bench) breakdown(ctx context.Context, ns string) (map[string][]float64, int) {
	list, err := b.client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + podstartup.EventReason})
	if err != nil {
		fmt.Printf("  listing %s events: %v\n", podstartup.EventReason, err)
		return nil, 0
	}
	out := map[string][]float64{}
	n := 0
	for _, e := range list.Items {
		if e.InvolvedObject.Name == probeCheckPod {
			continue // not part of the workload
		}
		total, phases, err := podstartup.ParseMessage(e.Message)
		if err != nil {
			fmt.Printf("  %v\n", err)
			continue
		}
		n++
		out["total"] = append(out["total"], total.Seconds())
		perPhase := map[string]float64{}
		for k, d := range phases {
			perPhase[podstartup.PhaseOf(k)] += d.Seconds()
		}
		for p, s := range perPhase {
			out[p] = append(out[p], s)
		}
	}
	return out, n
}

// phaseOrder is the order phases are shown in.
var phaseOrder = []string{
	podstartup.Admission, podstartup.Queue, podstartup.Volumes, podstartup.Sandbox,
	podstartup.Image, podstartup.Create, podstartup.Start, podstartup.Readiness, "total",
}

// breakdownTable renders Skiff's pooled breakdown per workload (ms).
func (r *results) breakdownTable() string {
	var b strings.Builder
	for _, w := range r.order {
		runs := r.pick(w, skiff)
		pooled := map[string][]float64{}
		events := 0
		for _, x := range runs {
			events += x.BreakdownEvents
			for p, v := range x.Breakdown {
				pooled[p] = append(pooled[p], v...)
			}
		}
		if events == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n%s — %d PodStartupBreakdown events (ms):\n\n", runs[0].Name, events)
		b.WriteString("| phase | p50 | p90 | p99 | max |\n|---|---:|---:|---:|---:|\n")
		phases := append([]string(nil), phaseOrder...)
		for _, p := range slices.Sorted(maps.Keys(pooled)) {
			if !contains(phases, p) {
				phases = append(phases, p)
			}
		}
		for _, p := range phases {
			v := pooled[p]
			if len(v) == 0 {
				continue
			}
			fmt.Fprintf(&b, "| %s | %.1f | %.1f | %.1f | %.1f |\n", p,
				1000*percentile(v, 50), 1000*percentile(v, 90), 1000*percentile(v, 99), 1000*percentile(v, 100))
		}
	}
	return b.String()
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}
