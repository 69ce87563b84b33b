package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"
)

// heapHook returns what the large batch runs at the end of its hold: it
// fetches the kubelet's heap profile, or nil when -heap-profile is off.
func (b *bench) heapHook(ctx context.Context, kind string, round int) func() {
	if !b.o.heapProfile {
		return nil
	}
	return func() { b.heapProfile(ctx, kind, round) }
}

// heapProfile fetches a kubelet's Go memory statistics from its /metrics
// and then its heap profile (after a GC, so in-use figures are live
// memory) through the apiserver's node proxy, which reaches :10250 the
// same way for Skiff and upstream. The last of each kubelet is kept with
// the results.
func (b *bench) heapProfile(ctx context.Context, kind string, round int) {
	path := filepath.Join(b.dir, fmt.Sprintf("r%d-%s.heap.pprof", round, kind))
	metrics, err := b.nodeProxy("metrics").DoRaw(ctx)
	if err != nil {
		fmt.Printf("  metrics of %s: %v\n", kind, err)
	} else if err := os.WriteFile(memstatsPath(path), goMemoryLines(metrics), 0o644); err != nil {
		fmt.Printf("  metrics of %s: %v\n", kind, err)
	}
	raw, err := b.nodeProxy("debug/pprof/heap").Param("gc", "1").DoRaw(ctx)
	if err != nil {
		fmt.Printf("  heap profile of %s: %v\n", kind, err)
		return
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		fmt.Printf("  heap profile of %s: %v\n", kind, err)
		return
	}
	b.results.heaps[kind] = path
}

// nodeProxy is a GET of the bench node's kubelet endpoint through the
// apiserver's node proxy, which reaches :10250 the same way for Skiff and
// upstream.
func (b *bench) nodeProxy(endpoint string) *rest.Request {
	return b.client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", nodeName, "proxy", endpoint)
}

// memstatsPath is where the Go memory statistics taken with a heap
// profile are kept.
func memstatsPath(heapPath string) string {
	return strings.TrimSuffix(heapPath, ".heap.pprof") + ".memstats.txt"
}

// goMemoryLines keeps the Go runtime's memory and goroutine samples of a
// Prometheus text exposition.
func goMemoryLines(exposition []byte) []byte {
	var out []byte
	for _, l := range strings.SplitAfter(string(exposition), "\n") {
		if strings.HasPrefix(l, "go_memstats_") || strings.HasPrefix(l, "go_goroutines ") || strings.HasPrefix(l, "go_threads ") {
			out = append(out, l...)
		}
	}
	return out
}

// saveHeaps keeps each kubelet's last heap profile and memory statistics
// next to the results, with `go tool pprof -top` of its in-use space as
// text.
func (r *results) saveHeaps(base string, stdout io.Writer) {
	for kind, src := range r.heaps {
		dst := fmt.Sprintf("%s-%s.heap.pprof", base, kind)
		if stats, err := os.ReadFile(memstatsPath(src)); err == nil {
			_ = os.WriteFile(memstatsPath(dst), stats, 0o644)
		}
		txt := strings.TrimSuffix(dst, ".pprof") + ".txt"
		if err := keepProfile(src, dst, txt, "-sample_index=inuse_space"); err != nil {
			fmt.Fprintf(stdout, "heap profile of %s: %v\n", kind, err)
			continue
		}
		fmt.Fprintf(stdout, "heap profile of %s with every pod of the large batch Ready: %s (top: %s)\n", kind, dst, txt)
	}
}
