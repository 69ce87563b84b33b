package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
)

// memoryBudget is Skiff's memory as last accepted (bench/memory-budget.json).
// A run whose figure grows more than Slack over it fails make bench. The
// figures are raised only by a commit that says why.
type memoryBudget struct {
	// IdleRSSMB is the node's idle RSS; SteadyRSSMB the steady RSS with
	// the large batch (workload b) Ready; both medians of the rounds.
	IdleRSSMB   float64 `json:"idleRSSMB"`
	SteadyRSSMB float64 `json:"steadyRSS100PodsMB"`
	Slack       float64 `json:"slack"` // 0.10 for 10 %
	// From names the run the figures were taken from.
	From string `json:"from"`
}

func readBudget(path string) (*memoryBudget, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m memoryBudget
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if m.IdleRSSMB <= 0 || m.SteadyRSSMB <= 0 || m.Slack <= 0 {
		return nil, fmt.Errorf("%s: idleRSSMB, steadyRSS100PodsMB and slack must be positive", path)
	}
	return &m, nil
}

// memoryFigure is one of Skiff's measured figures with its breakdown.
type memoryFigure struct {
	name             string
	rss, anon, limit float64
}

// checkBudget compares this run's Skiff figures with the budget, prints
// each with its breakdown (anonymous: heap and stacks; the rest: the
// binary and other mapped files) and says which are over. A figure the
// run did not measure (workload b not run) is skipped, and said so.
func (r *results) checkBudget(m *memoryBudget, heapTop string, w io.Writer) error {
	var figs []memoryFigure
	var idle, idleAnon []float64
	for _, n := range r.Nodes {
		if n.Kubelet == skiff {
			idle, idleAnon = append(idle, n.Idle.MedianRSSMB), append(idleAnon, n.Idle.MedianAnonMB)
		}
	}
	figs = append(figs, memoryFigure{"idle RSS", median(idle), median(idleAnon), m.IdleRSSMB})
	var steady, steadyAnon []float64
	for _, x := range r.pick("b", skiff) {
		if x.Error == "" {
			steady, steadyAnon = append(steady, x.Steady.MedianRSSMB), append(steadyAnon, x.Steady.MedianAnonMB)
		}
	}
	figs = append(figs, memoryFigure{"steady RSS with the large batch Ready", median(steady), median(steadyAnon), m.SteadyRSSMB})

	fmt.Fprintf(w, "\nmemory budget (%.0f %% over the figures of %s):\n", m.Slack*100, m.From)
	var over []string
	for _, f := range figs {
		if math.IsNaN(f.rss) {
			fmt.Fprintf(w, "  %-40s not measured in this run\n", f.name)
			continue
		}
		max := f.limit * (1 + m.Slack)
		verdict := "ok"
		if f.rss > max {
			verdict = "OVER"
			over = append(over, f.name)
		}
		fmt.Fprintf(w, "  %-40s %6.1f MB of %6.1f (budget %.1f): anonymous %.1f, files %.1f  %s\n",
			f.name, f.rss, max, f.limit, f.anon, f.rss-f.anon, verdict)
	}
	if len(over) == 0 {
		return nil
	}
	if heapTop != "" {
		if b, err := os.ReadFile(heapTop); err == nil {
			fmt.Fprintf(w, "Skiff's heap with the large batch Ready (%s):\n%s", heapTop, firstLines(string(b), 25))
		}
	}
	return fmt.Errorf("memory of Skiff over its budget (bench/memory-budget.json): %s; "+
		"raise the budget only in a commit that says why", strings.Join(over, ", "))
}

func firstLines(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "")
}
