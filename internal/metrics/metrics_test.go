package metrics

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
	h := InstrumentHandler(ServerReadOnly, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	ops := value(runtimeOperations.WithLabelValues("test_op"))
	errs := value(runtimeOperationsErrors.WithLabelValues("test_op"))
	RecordRuntimeOperation("test_op", time.Now(), nil)
	RecordRuntimeOperation("test_op", time.Now(), errors.New("boom"))
	if got := value(runtimeOperations.WithLabelValues("test_op")) - ops; got != 2 {
		t.Errorf("operations %v, want 2", got)
	}
	if got := value(runtimeOperationsErrors.WithLabelValues("test_op")) - errs; got != 1 {
		t.Errorf("errors %v, want 1", got)
	}
}

// The /metrics output names the upstream metrics, with Go and process ones.
func TestHandlerExposesUpstreamNames(t *testing.T) {
	SetNodeName("n1")
	RecordRuntimeOperation("version", time.Now(), nil)
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
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
		"go_goroutines ", "process_resident_memory_bytes ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func pod(uid types.UID, created time.Time) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: uid, CreationTimestamp: metav1.NewTime(created)},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "a"}, {Name: "b"}}},
	}
}

func statusOf(running ...bool) *v1.PodStatus {
	st := &v1.PodStatus{}
	for _, r := range running {
		cs := v1.ContainerStatus{}
		if r {
			cs.State.Running = &v1.ContainerStateRunning{}
		} else {
			cs.State.Waiting = &v1.ContainerStateWaiting{Reason: "ContainerCreating"}
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	return st
}

func histogramCount(t *testing.T, name string) uint64 {
	t.Helper()
	mfs, err := Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func histogramSum(t *testing.T, name string) float64 {
	t.Helper()
	mfs, _ := Registry.Gather()
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetHistogram().GetSampleSum()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func TestPodStartTracker(t *testing.T) {
	tr := &podStartTracker{pods: map[types.UID]*podStart{}}
	t0 := time.Now()
	created := t0.Add(-2 * time.Second)

	// A pod seen, waiting, then started after a 3 s image pull.
	p := pod("u1", created)
	tr.Seen("u1", t0)
	tr.Status(p, statusOf(false, false), t0.Add(time.Second))
	tr.Pulled("u1", t0.Add(time.Second), t0.Add(4*time.Second))
	count, sum := histogramCount(t, "kubelet_pod_start_duration_seconds"), histogramSum(t, "kubelet_pod_start_duration_seconds")
	sliSum := histogramSum(t, "kubelet_pod_start_sli_duration_seconds")
	tr.Status(p, statusOf(true, false), t0.Add(5*time.Second)) // not all started yet
	tr.Status(p, statusOf(true, true), t0.Add(6*time.Second))
	tr.Status(p, statusOf(true, true), t0.Add(9*time.Second)) // observed once only
	if got := histogramCount(t, "kubelet_pod_start_duration_seconds") - count; got != 1 {
		t.Fatalf("observations %d, want 1", got)
	}
	if got := histogramSum(t, "kubelet_pod_start_duration_seconds") - sum; got < 5.99 || got > 6.01 {
		t.Errorf("start duration %v, want 6 (first seen to all started)", got)
	}
	// created 2 s before first sight, started 6 s after, 3 s pulling: 5 s.
	if got := histogramSum(t, "kubelet_pod_start_sli_duration_seconds") - sliSum; got < 4.99 || got > 5.01 {
		t.Errorf("SLI duration %v, want 5 (creation to start, minus pulling)", got)
	}

	// A pod already running when first seen (adopted) is not observed.
	count = histogramCount(t, "kubelet_pod_start_duration_seconds")
	tr.Seen("u2", t0)
	tr.Status(pod("u2", created), statusOf(true, true), t0.Add(time.Second))
	if got := histogramCount(t, "kubelet_pod_start_duration_seconds") - count; got != 0 {
		t.Errorf("adopted pod observed %d times", got)
	}
	// Unknown pods are ignored; forgotten ones are dropped.
	tr.Status(pod("u3", created), statusOf(true, true), t0)
	tr.Forget("u1")
	tr.Forget("u2")
	if len(tr.pods) != 0 {
		t.Errorf("tracker keeps %d pods after Forget", len(tr.pods))
	}
}

func TestProbeMetrics(t *testing.T) {
	target := ProbeTarget{ProbeType: "Readiness", Namespace: "ns", Pod: "p", PodUID: "u", Container: "c"}
	other := ProbeTarget{ProbeType: "Liveness", Namespace: "ns", Pod: "q", PodUID: "v", Container: "c"}
	ObserveProbe(target, ProbeSuccessful)
	ObserveProbe(target, ProbeSuccessful)
	ObserveProbe(target, ProbeFailed)
	ObserveProbeDuration(target, 10*time.Millisecond)
	ObserveProbe(other, ProbeUnknown)
	if got := value(proberResults.WithLabelValues("Readiness", "successful", "c", "p", "ns", "u")); got != 2 {
		t.Errorf("successful = %v, want 2", got)
	}
	rec := httptest.NewRecorder()
	ProbesHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics/probes", nil))
	want := `prober_probe_total{container="c",namespace="ns",pod="p",pod_uid="u",probe_type="Readiness",result="failed"} 1`
	if !strings.Contains(rec.Body.String(), want) {
		t.Errorf("/metrics/probes lacks %s:\n%s", want, rec.Body.String())
	}
	ForgetPodProbes("ns", "p", "u")
	if n := count(proberResults); n != 1 {
		t.Errorf("%d probe series left after ForgetPodProbes, want only the other pod's", n)
	}
	if n := count(proberDuration); n != 0 {
		t.Errorf("%d probe duration series left after ForgetPodProbes", n)
	}
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

// count is the number of series a collector has.
func count(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric, 100)
	c.Collect(ch)
	close(ch)
	return len(ch)
}
