package main

import (
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The summary JSON keeps the figures and drops the samples; the samples
// file gives back every one of them.
func TestSummaryAndSamples(t *testing.T) {
	r := &results{Date: "d", Workloads: []*workloadResult{{
		Workload: "b", Kubelet: "skiff", Pods: 2, ReadyMakespan: 3.5,
		Running: []float64{1, 2}, Ready: []float64{1.5, 2.5}, Delete: []float64{0.5, 0.7},
		Breakdown: map[string][]float64{"sandbox": {0.1, 0.2}}, BreakdownEvents: 2,
		Kill: map[string][]float64{"exit": {0.01}},
	}}}
	js, err := json.Marshal(r.summary())
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"running"`, `"ready"`, `"delete"`, `"breakdown"`, `"kill"`} {
		if strings.Contains(string(js), field) {
			t.Errorf("summary has %s: %s", field, js)
		}
	}
	if !strings.Contains(string(js), `"readyMakespan":3.5`) || !strings.Contains(string(js), `"breakdownEvents":2`) {
		t.Errorf("summary lost a figure: %s", js)
	}
	if len(r.Workloads[0].Running) != 2 {
		t.Error("summary changed the results it was made from")
	}

	path := filepath.Join(t.TempDir(), "x.samples.json.gz")
	if err := writeSamples(path, r); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var back results
	if err := json.NewDecoder(zr).Decode(&back); err != nil {
		t.Fatal(err)
	}
	if got, want := back.Workloads[0], r.Workloads[0]; !reflect.DeepEqual(got, want) {
		t.Errorf("samples file gives back %+v, want %+v", got, want)
	}
}
