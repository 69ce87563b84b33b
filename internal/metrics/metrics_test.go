package metrics

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestImageSizeLabel(t *testing.T) {
	for _, tc := range []struct {
		size uint64
		want string
	}{
		{0, "0-10MB"}, {10<<20 - 1, "0-10MB"}, {10 << 20, "10MB-100MB"}, {600 << 20, "500MB-1GB"},
		{3 << 30, "1GB-5GB"}, {99 << 30, "60GB-100GB"}, {100 << 30, "GT100GB"},
	} {
		if got := imageSizeLabel(tc.size); got != tc.want {
			t.Errorf("imageSizeLabel(%d) = %q, want %q", tc.size, got, tc.want)
		}
	}
}

func TestPathLabel(t *testing.T) {
	for path, want := range map[string]string{
		"/stats/summary": "stats", "/metrics": "metrics", "/metrics/resource": "metrics/resource",
		"/metrics/probes": "metrics/probes", "/pods": "pods", "/exec/ns/pod/c": "exec",
		"/no/such": "other", "/": "other", "/metrics/": "metrics",
	} {
		if got := pathLabel(path); got != want {
			t.Errorf("pathLabel(%q) = %q, want %q", path, got, want)
		}
	}
}

func TestInstrumentHandlerCountsRequests(t *testing.T) {
	r := New()
	httpRequests, httpInflight := r.http.requests, r.http.inflight
	h := r.InstrumentHandler(ServerReadOnly, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if g := value(httpInflight.WithLabelValues("GET", "stats", "readonly", "false")); g != 1 {
			t.Errorf("inflight during the request = %v, want 1", g)
		}
	}))
	before := value(httpRequests.WithLabelValues("GET", "stats", "readonly", "false"))
	for i := 0; i < 3; i++ {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/stats/summary", nil))
	}
	if got := value(httpRequests.WithLabelValues("GET", "stats", "readonly", "false")) - before; got != 3 {
		t.Errorf("requests counted %v, want 3", got)
	}
	if g := value(httpInflight.WithLabelValues("GET", "stats", "readonly", "false")); g != 0 {
		t.Errorf("inflight after the requests = %v, want 0", g)
	}
}

func TestRecordRuntimeOperation(t *testing.T) {
	m := &New().Runtime
	m.RecordOperation("test_op", time.Millisecond, nil)
	m.RecordOperation("test_op", time.Millisecond, errors.New("boom"))
	if got := value(m.operations.WithLabelValues("test_op")); got != 2 {
		t.Errorf("operations %v, want 2", got)
	}
	if got := value(m.operationsErrors.WithLabelValues("test_op")); got != 1 {
		t.Errorf("errors %v, want 1", got)
	}
}

// The /metrics output names the upstream metrics, with Go and process ones.
func TestHandlerExposesUpstreamNames(t *testing.T) {
	r := New()
	r.SetNodeName("n1")
	r.Runtime.RecordOperation("version", time.Millisecond, nil)
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`kubelet_node_name{node="n1"} 1`,
		"kubelet_runtime_operations_total{operation_type=\"version\"}",
		"kubelet_runtime_operations_duration_seconds_bucket{operation_type=\"version\",le=",
		"# TYPE kubelet_pod_start_duration_seconds histogram",
		"# TYPE kubelet_pod_start_sli_duration_seconds histogram",
		"# TYPE kubelet_pleg_relist_duration_seconds histogram",
		"# TYPE kubelet_pleg_relist_interval_seconds histogram",
		"# TYPE kubelet_running_pods gauge",
		"# TYPE kubelet_started_pods_total counter",
		"# TYPE skiff_pod_startup_duration_seconds histogram",
		"# TYPE kubelet_certificate_manager_client_ttl_seconds gauge",
		"# TYPE kubelet_certificate_manager_server_ttl_seconds gauge",
		"# TYPE kubelet_certificate_manager_client_expiration_renew_errors counter",
		"# TYPE kubelet_server_expiration_renew_errors counter",
		"go_goroutines ", "process_resident_memory_bytes ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// /metrics/probes serves upstream's two series, with its help texts
// (stability prefixes included), types, labels and buckets; ForgetProbe
// drops one probe's series and nothing else.
func TestProbeMetrics(t *testing.T) {
	r := New()
	target := ProbeTarget{ProbeType: "Readiness", Namespace: "ns", Pod: "p", PodUID: "u", Container: "c"}
	other := ProbeTarget{ProbeType: "Liveness", Namespace: "ns", Pod: "p", PodUID: "u", Container: "c"}
	r.ObserveProbe(target, ProbeSuccessful)
	r.ObserveProbe(target, ProbeSuccessful)
	r.ObserveProbe(target, ProbeFailed)
	r.ObserveProbeDuration(target, 10*time.Millisecond)
	r.ObserveProbe(other, ProbeUnknown)
	r.ObserveProbeDuration(other, 2*time.Second)

	body := scrapeProbes(t, r)
	for _, want := range []string{
		"# HELP prober_probe_total [BETA] Cumulative number of a liveness, readiness or startup probe for a container by result.\n# TYPE prober_probe_total counter\n",
		`prober_probe_total{container="c",namespace="ns",pod="p",pod_uid="u",probe_type="Readiness",result="successful"} 2`,
		`prober_probe_total{container="c",namespace="ns",pod="p",pod_uid="u",probe_type="Readiness",result="failed"} 1`,
		`prober_probe_total{container="c",namespace="ns",pod="p",pod_uid="u",probe_type="Liveness",result="unknown"} 1`,
		"# HELP prober_probe_duration_seconds [ALPHA] Duration in seconds for a probe response.\n# TYPE prober_probe_duration_seconds histogram\n",
		`prober_probe_duration_seconds_bucket{container="c",namespace="ns",pod="p",probe_type="Readiness",le="0.01"} 1`,
		`prober_probe_duration_seconds_bucket{container="c",namespace="ns",pod="p",probe_type="Liveness",le="2.5"} 1`,
		`prober_probe_duration_seconds_count{container="c",namespace="ns",pod="p",probe_type="Readiness"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics/probes lacks %q:\n%s", want, body)
		}
	}
	// Upstream's buckets: Prometheus' defaults, 5 ms to 10 s.
	if n := strings.Count(body, `prober_probe_duration_seconds_bucket{container="c",namespace="ns",pod="p",probe_type="Readiness"`); n != len(prometheus.DefBuckets)+1 {
		t.Errorf("%d buckets, want %d and +Inf", n, len(prometheus.DefBuckets))
	}

	r.ForgetProbe(target)
	body = scrapeProbes(t, r)
	if strings.Contains(body, `probe_type="Readiness"`) {
		t.Errorf("series of the forgotten probe left:\n%s", body)
	}
	if !strings.Contains(body, `probe_type="Liveness",result="unknown"} 1`) || !strings.Contains(body, `prober_probe_duration_seconds_count{container="c",namespace="ns",pod="p",probe_type="Liveness"} 1`) {
		t.Errorf("ForgetProbe took another probe's series:\n%s", body)
	}
}

func scrapeProbes(t *testing.T, r *Registry) string {
	t.Helper()
	rec := httptest.NewRecorder()
	r.ProbesHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics/probes", nil))
	if rec.Code != 200 {
		t.Fatalf("/metrics/probes: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// value reads a counter or gauge.
func value(m prometheus.Metric) float64 {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		panic(err)
	}
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}

// Two registries (two kubelets in one process) count apart.
func TestRegistriesCountApart(t *testing.T) {
	a, b := New(), New()
	a.Runtime.StartedPods.Inc()
	a.SetNodeName("a")
	if got := value(b.Runtime.StartedPods); got != 0 {
		t.Errorf("the other registry's started pods = %v, want 0", got)
	}
	rec := httptest.NewRecorder()
	b.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if strings.Contains(rec.Body.String(), `node="a"`) {
		t.Error("the other registry serves node a's name")
	}
}

// The certificate TTL gauges: +Inf with no certificate, else the whole
// seconds left, negative once expired, as upstream's.
func TestCertificateTTL(t *testing.T) {
	r := New()
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	r.clientCert.now, r.servingCert.now = func() time.Time { return now }, func() time.Time { return now }
	read := func() (client, serving float64) {
		mfs, err := r.Gatherers().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			switch mf.GetName() {
			case "kubelet_certificate_manager_client_ttl_seconds":
				client = mf.GetMetric()[0].GetGauge().GetValue()
			case "kubelet_certificate_manager_server_ttl_seconds":
				serving = mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return client, serving
	}
	if c, s := read(); !math.IsInf(c, 1) || !math.IsInf(s, 1) {
		t.Errorf("without certificates: client %v, serving %v; want +Inf", c, s)
	}
	var client, serving *tls.Certificate
	r.WatchClientCertificate(func() *tls.Certificate { return client })
	r.WatchServingCertificate(func() *tls.Certificate { return serving })
	if c, _ := read(); !math.IsInf(c, 1) {
		t.Errorf("no client certificate issued yet: %v, want +Inf", c)
	}
	client = &tls.Certificate{Leaf: &x509.Certificate{NotAfter: now.Add(90*time.Minute + 500*time.Millisecond)}}
	serving = &tls.Certificate{Leaf: &x509.Certificate{NotAfter: now.Add(-time.Hour)}}
	if c, s := read(); c != 5400 || s != -3600 {
		t.Errorf("client %v, serving %v; want 5400 and -3600", c, s)
	}
}
