package main

import "testing"

// Only the Go runtime's memory, goroutine and thread samples are kept.
func TestGoMemoryLines(t *testing.T) {
	in := "# HELP go_memstats_heap_inuse_bytes x\ngo_memstats_heap_inuse_bytes 6.5e+06\ngo_goroutines 120\ngo_gc_duration_seconds{quantile=\"0\"} 1\nkubelet_running_pods 100\ngo_threads 12\n"
	want := "go_memstats_heap_inuse_bytes 6.5e+06\ngo_goroutines 120\ngo_threads 12\n"
	if got := string(goMemoryLines([]byte(in))); got != want {
		t.Errorf("goMemoryLines = %q, want %q", got, want)
	}
}
