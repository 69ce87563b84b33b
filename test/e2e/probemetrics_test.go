//go:build e2e

package e2e

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// /metrics/probes through the apiserver's node proxy, as Prometheus
// scrapes it in kube-prometheus: a pod's successful and failed probes are
// counted by type and result, successful ones timed; its series go when
// the pod goes. Without credentials the node refuses the path.
func TestProbeMetricsThroughNodeProxy(t *testing.T) {
	cn := sharedNode(t)
	p := busyboxPod("probed", "exec sleep 3600")
	p.Spec.Containers[0].ReadinessProbe = probe(execHandler("test", "-f", "/tmp/ready"))
	p.Spec.Containers[0].LivenessProbe = probe(execHandler("true"))
	cn.createPod(t, p)
	cn.waitPodEvent(t, "probed", "Unhealthy", "Readiness probe failed", 60*time.Second)
	cn.execIn(t, "probed", "touch", "/tmp/ready")
	p = cn.waitPod(t, cn.ns, "probed", 30*time.Second, "Ready", isReady)

	scrapeProbes := func() map[string]*dto.MetricFamily {
		t.Helper()
		b, err := cn.admin.CoreV1().RESTClient().Get().
			AbsPath("/api/v1/nodes", cn.hostname(), "proxy", "metrics", "probes").DoRaw(cn.ctx())
		must(t, err)
		mfs, err := parseMetrics(bytes.NewReader(b))
		must(t, err)
		return mfs
	}
	of := func(probeType string, extra ...string) map[string]string {
		l := map[string]string{"namespace": cn.ns, "pod": "probed", "container": "main", "probe_type": probeType}
		for i := 0; i+1 < len(extra); i += 2 {
			l[extra[i]] = extra[i+1]
		}
		return l
	}
	uid := string(p.UID)
	var mfs map[string]*dto.MetricFamily
	// Liveness runs only once the container has started: give it a period.
	waitFor(t, 20*time.Second, "a successful liveness probe counted", func() (bool, error) {
		mfs = scrapeProbes()
		return gauge(mfs, "prober_probe_total", of("Liveness", "result", "successful", "pod_uid", uid)) >= 1, nil
	})
	for _, c := range []struct {
		probeType, result string
	}{{"Readiness", "failed"}, {"Readiness", "successful"}, {"Liveness", "successful"}} {
		if v := gauge(mfs, "prober_probe_total", of(c.probeType, "result", c.result, "pod_uid", uid)); v < 1 {
			t.Errorf("prober_probe_total %s %s = %v, want at least 1", c.probeType, c.result, v)
		}
	}
	if v := gauge(mfs, "prober_probe_total", of("Liveness", "result", "failed")); v != 0 {
		t.Errorf("failed liveness probes counted: %v", v)
	}
	if mf := mfs["prober_probe_total"]; mf.GetType() != dto.MetricType_COUNTER {
		t.Errorf("prober_probe_total is a %v", mf.GetType())
	}
	if n := histCount(mfs, "prober_probe_duration_seconds", of("Readiness")); n < 1 {
		t.Errorf("prober_probe_duration_seconds has %d readiness observations, want some", n)
	}

	// Straight to the node, without credentials: refused.
	insecure := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := insecure.Get(fmt.Sprintf("https://127.0.0.1:%d/metrics/probes", cn.apiPort))
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/metrics/probes without credentials: %s, want 401", resp.Status)
	}

	must(t, cn.admin.CoreV1().Pods(cn.ns).Delete(cn.ctx(), "probed", metav1.DeleteOptions{}))
	waitFor(t, 60*time.Second, "the pod's probe series gone", func() (bool, error) {
		mfs := scrapeProbes()
		return len(series(mfs, "prober_probe_total", map[string]string{"pod_uid": uid})) == 0 &&
			len(series(mfs, "prober_probe_duration_seconds", map[string]string{"namespace": cn.ns, "pod": "probed"})) == 0, nil
	})
}
