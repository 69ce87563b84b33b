package main

import (
	"fmt"
	"net/http/httptest"
	"testing"

	info "github.com/google/cadvisor/info/v1"
	v2 "github.com/google/cadvisor/info/v2"
	"github.com/google/cadvisor/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/utils/clock"
)

// BenchmarkUpstreamCadvisorScrape is the upstream kubelet's
// /metrics/cadvisor scrape of 100 pods (pod cgroup, sandbox and container
// each), as Skiff's BenchmarkCadvisorScrape (internal/stats) measures its
// own: cAdvisor's collectors with the kubelet's metric set and labels,
// gathered and written in the text format. The container infos come
// ready-made, so cAdvisor's copying them out of its cache is left out:
// the real scrape costs more.
func BenchmarkUpstreamCadvisorScrape(b *testing.B) {
	p := provider{containers: map[string]*info.ContainerInfo{}}
	for i := 0; i < 100; i++ {
		pod := map[string]string{"io.kubernetes.pod.name": fmt.Sprintf("p%d", i), "io.kubernetes.pod.namespace": "default"}
		ctr := map[string]string{"io.kubernetes.container.name": "main"}
		for k, v := range pod {
			ctr[k] = v
		}
		cg := fmt.Sprintf("/kubepods/burstable/podu%d", i)
		p.containers[cg] = cgroup(cg, nil, "", pod, false, false)
		p.containers[cg+"/sb"] = cgroup(cg+"/sb", []string{fmt.Sprintf("sb%d", i), cg + "/sb"}, "registry.k8s.io/pause:3.10", pod, true, true)
		p.containers[cg+"/c"] = cgroup(cg+"/c", []string{fmt.Sprintf("c%d", i), cg + "/c"}, "docker.io/library/busybox:1.36", ctr, false, true)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewPrometheusMachineCollector(p, kubeletMetrics))
	reg.MustRegister(metrics.NewPrometheusCollector(p, kubeletLabels, kubeletMetrics, clock.RealClock{},
		v2.RequestOptions{IdType: v2.TypeName, Count: 1, Recursive: true}))
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	req := httptest.NewRequest("GET", "/metrics/cadvisor", nil)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if i == 0 {
			b.ReportMetric(float64(rec.Body.Len()), "bytes/scrape")
		}
	}
}
