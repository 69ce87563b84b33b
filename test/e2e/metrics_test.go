//go:build e2e

package e2e

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// /metrics on the read-only port: after a static pod starts, the pod start
// and runtime operation histograms have observations, the running gauges
// count it, and the Go/process/HTTP metrics are there. (The SLI histogram
// needs a creation timestamp, which static pods lack: the cluster test
// checks it.)
func TestMetricsAfterPodStart(t *testing.T) {
	n := newPrivateNode(t)
	n.start()
	n.writeManifest("m.yaml", staticPod("metrics-pod", "sleep 3600", ""))
	n.waitRunning("metrics-pod-"+nodeName, 60*time.Second)

	var mfs map[string]*dto.MetricFamily
	// The pod start is observed when the status shows it running, and the
	// running gauges when the PLEG next reads the runtime: give both a
	// moment.
	waitFor(t, 10*time.Second, "pod start observed", func() (bool, error) {
		var err error
		if mfs, err = scrape(n.url("/metrics")); err != nil {
			return false, err
		}
		return histCount(mfs, "kubelet_pod_start_duration_seconds", nil) >= 1 &&
			gauge(mfs, "kubelet_running_pods", nil) >= 1, nil
	})
	for _, h := range []struct {
		name   string
		labels map[string]string
	}{
		{"kubelet_pod_start_duration_seconds", nil},
		{"kubelet_runtime_operations_duration_seconds", map[string]string{"operation_type": "run_podsandbox"}},
		{"kubelet_runtime_operations_duration_seconds", map[string]string{"operation_type": "create_container"}},
		{"kubelet_runtime_operations_duration_seconds", map[string]string{"operation_type": "start_container"}},
		{"kubelet_runtime_operations_duration_seconds", map[string]string{"operation_type": "list_containers"}},
		{"kubelet_pleg_relist_duration_seconds", nil},
		{"kubelet_pleg_relist_interval_seconds", nil},
		{"kubelet_pod_worker_duration_seconds", map[string]string{"operation_type": "create"}},
		// Skiff's own start-up breakdown is on the same registry.
		{"skiff_pod_startup_duration_seconds", nil},
		{"skiff_pod_startup_phase_duration_seconds", map[string]string{"phase": "sandbox"}},
	} {
		if c := histCount(mfs, h.name, h.labels); c < 1 {
			t.Errorf("%s%v: %d observations, want some", h.name, h.labels, c)
		}
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
	}{
		{"kubelet_runtime_operations_total", map[string]string{"operation_type": "run_podsandbox"}},
		{"kubelet_started_pods_total", nil},
		{"kubelet_started_containers_total", map[string]string{"container_type": "container"}},
		{"kubelet_running_containers", map[string]string{"container_state": "running"}},
		{"kubelet_node_name", map[string]string{"node": nodeName}},
		{"kubelet_http_requests_total", map[string]string{"path": "healthz", "server_type": "readonly"}},
		{"go_goroutines", nil},
		{"process_resident_memory_bytes", nil},
	} {
		if v := gauge(mfs, c.name, c.labels); v < 1 {
			t.Errorf("%s%v = %v, want at least 1", c.name, c.labels, v)
		}
	}
	resp, err := http.Get(n.url("/metrics/probes"))
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") == "" {
		t.Errorf("/metrics/probes: %s", resp.Status)
	}
}

// scrape fetches and parses a Prometheus text endpoint.
func scrape(url string) (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	return parseMetrics(resp.Body)
}

// parseMetrics parses the Prometheus text format.
func parseMetrics(r io.Reader) (map[string]*dto.MetricFamily, error) {
	var p expfmt.TextParser
	return p.TextToMetricFamilies(r)
}

// series returns the metrics of a family whose labels include want.
func series(mfs map[string]*dto.MetricFamily, name string, want map[string]string) []*dto.Metric {
	var out []*dto.Metric
	mf, ok := mfs[name]
	if !ok {
		return nil
	}
next:
	for _, m := range mf.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		out = append(out, m)
	}
	return out
}

// gauge sums the counter, gauge or untyped values of the matching series.
func gauge(mfs map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	var sum float64
	for _, m := range series(mfs, name, want) {
		sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
	}
	return sum
}

func histCount(mfs map[string]*dto.MetricFamily, name string, want map[string]string) uint64 {
	var n uint64
	for _, m := range series(mfs, name, want) {
		n += m.GetHistogram().GetSampleCount()
	}
	return n
}
