package main

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"os"
)

// summary is r without its per-sample fields (per-pod times, start-up
// breakdowns, kill stages): the figures the table shows, small enough to
// keep one per run in git. The samples go to writeSamples' file.
func (r *results) summary() *results {
	s := *r
	s.Workloads = make([]*workloadResult, len(r.Workloads))
	for i, w := range r.Workloads {
		c := *w
		c.Running, c.Ready, c.Delete = nil, nil, nil
		c.Breakdown, c.Kill = nil, nil
		s.Workloads[i] = &c
	}
	return &s
}

// writeSamples writes all of r, samples included, as gzipped JSON.
func writeSamples(path string, r *results) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	zw := gzip.NewWriter(f)
	if err := json.NewEncoder(zw).Encode(r); err != nil {
		return err
	}
	return zw.Close()
}
