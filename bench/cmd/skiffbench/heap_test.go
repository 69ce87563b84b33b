package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
)

// Only the Go runtime's memory, goroutine and thread samples are kept.
func TestGoMemoryLines(t *testing.T) {
	in := "# HELP go_memstats_heap_inuse_bytes x\ngo_memstats_heap_inuse_bytes 6.5e+06\ngo_goroutines 120\ngo_gc_duration_seconds{quantile=\"0\"} 1\nkubelet_running_pods 100\ngo_threads 12\n"
	want := "go_memstats_heap_inuse_bytes 6.5e+06\ngo_goroutines 120\ngo_threads 12\n"
	if got := string(goMemoryLines([]byte(in))); got != want {
		t.Errorf("goMemoryLines = %q, want %q", got, want)
	}
}

// keepProfile copies a profile and writes pprof's top of it with the
// given arguments (here the test's own heap profile).
func TestKeepProfile(t *testing.T) {
	dir := t.TempDir()
	dst, txt := filepath.Join(dir, "x.heap.pprof"), filepath.Join(dir, "x.heap.txt")
	src := filepath.Join(dir, "src.heap.pprof")
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := keepProfile(src, dst, txt, "-sample_index=inuse_space"); err != nil {
		t.Fatal(err)
	}
	orig, _ := os.ReadFile(src)
	if copied, err := os.ReadFile(dst); err != nil || !bytes.Equal(copied, orig) {
		t.Errorf("the profile was not copied: %v", err)
	}
	top, err := os.ReadFile(txt)
	if err != nil || !strings.Contains(string(top), "Type: inuse_space") {
		t.Errorf("top of the profile = %q, %v; want an inuse_space top", top, err)
	}
}
