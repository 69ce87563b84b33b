package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func budgetRun(idle, steady float64) *results {
	return &results{
		Nodes: []*nodeResult{
			{Kubelet: skiff, Idle: usage{MedianRSSMB: idle, MedianAnonMB: 10}},
			{Kubelet: upstream, Idle: usage{MedianRSSMB: 500}}, // never judged
		},
		Workloads: []*workloadResult{{Workload: "b", Kubelet: skiff, Steady: usage{MedianRSSMB: steady, MedianAnonMB: 30}}},
	}
}

func TestMemoryBudget(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "budget.json")
	if err := os.WriteFile(path, []byte(`{"idleRSSMB": 50, "steadyRSS100PodsMB": 70, "slack": 0.10, "from": "x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := readBudget(path)
	if err != nil {
		t.Fatal(err)
	}
	top := filepath.Join(dir, "skiff.heap.txt")
	if err := os.WriteFile(top, []byte("Type: inuse_space\nflat flat%\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name         string
		idle, steady float64
		over         []string
	}{
		{"within", 54.9, 76.9, nil},
		{"idle over", 55.1, 70, []string{"idle RSS"}},
		{"both over", 60, 80, []string{"idle RSS", "steady RSS"}},
	} {
		var out bytes.Buffer
		err := budgetRun(c.idle, c.steady).checkBudget(m, top, &out)
		if (err != nil) != (len(c.over) > 0) {
			t.Errorf("%s: err = %v\n%s", c.name, err, out.String())
			continue
		}
		for _, o := range c.over {
			if !strings.Contains(err.Error(), o) {
				t.Errorf("%s: error %q does not name %s", c.name, err, o)
			}
		}
		if len(c.over) > 0 && !strings.Contains(out.String(), "Type: inuse_space") {
			t.Errorf("%s: no heap breakdown printed:\n%s", c.name, out.String())
		}
	}
	// A run without workload b judges the idle figure only.
	r := budgetRun(51, 0)
	r.Workloads = nil
	var out bytes.Buffer
	if err := r.checkBudget(m, "", &out); err != nil || !strings.Contains(out.String(), "not measured") {
		t.Errorf("run without the large batch: %v\n%s", err, out.String())
	}
}

func TestRepositoryBudgetReads(t *testing.T) {
	if _, err := readBudget("../../memory-budget.json"); err != nil {
		t.Fatal(err)
	}
}
