//go:build e2e

package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// grpcImage serves only the gRPC health protocol (hack/grpchealth).
const grpcImage = "skiff.local/grpchealth:1"

// probe is a probe checked every second, settled by one result.
func probe(h v1.ProbeHandler) *v1.Probe {
	return &v1.Probe{ProbeHandler: h, PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1}
}

func execHandler(cmd ...string) v1.ProbeHandler {
	return v1.ProbeHandler{Exec: &v1.ExecAction{Command: cmd}}
}

func mainStatus(p *v1.Pod) v1.ContainerStatus {
	if len(p.Status.ContainerStatuses) == 0 {
		return v1.ContainerStatus{}
	}
	return p.Status.ContainerStatuses[0]
}

// execIn runs a command in the pod's main container through CRI.
func (cn *clusterNode) execIn(t *testing.T, pod string, cmd ...string) {
	t.Helper()
	id := strings.TrimPrefix(mainStatus(cn.getPod(t, pod)).ContainerID, "containerd://")
	if _, stderr, err := runtimeSvc.ExecSync(context.Background(), id, cmd, 10*time.Second); err != nil {
		t.Fatalf("exec %v in %s: %v: %s", cmd, pod, err, stderr)
	}
}

// A liveness probe that starts failing after ~10 s gets the
// container killed and restarted, with upstream's events; a startup probe
// holds back a liveness probe that would fail until the container has
// started.
func TestLivenessAndStartupProbes(t *testing.T) {
	cn := sharedNode(t)

	live := busyboxPod("liveness", "touch /tmp/healthy; sleep 10; rm /tmp/healthy; "+sleeper)
	live.Spec.Containers[0].LivenessProbe = probe(execHandler("test", "-f", "/tmp/healthy"))
	live.Spec.Containers[0].LivenessProbe.FailureThreshold = 2
	cn.createPod(t, live)

	// Until /tmp/started exists the liveness probe would fail at once.
	gated := busyboxPod("startup", "sleep 8; touch /tmp/started; "+sleeper)
	gated.Spec.Containers[0].StartupProbe = probe(execHandler("test", "-f", "/tmp/started"))
	gated.Spec.Containers[0].StartupProbe.FailureThreshold = 60
	gated.Spec.Containers[0].LivenessProbe = probe(execHandler("test", "-f", "/tmp/started"))
	cn.createPod(t, gated)

	// The startup probe runs and fails while the container runs, not
	// started and not ready.
	cn.waitPod(t, cn.ns, "startup", 60*time.Second, "running, not started", func(p *v1.Pod) bool {
		cs := mainStatus(p)
		return cs.State.Running != nil && cs.Started != nil && !*cs.Started && !cs.Ready
	})
	cn.waitPodEvent(t, "startup", "Unhealthy", "Startup probe failed", 30*time.Second)
	started := cn.waitPod(t, cn.ns, "startup", 60*time.Second, "started and ready", func(p *v1.Pod) bool {
		cs := mainStatus(p)
		return cs.Started != nil && *cs.Started && cs.Ready && isReady(p)
	})
	if n := mainStatus(started).RestartCount; n != 0 {
		t.Errorf("the startup-gated container restarted %d times: its liveness probe ran before it started", n)
	}
	if hasEvent(cn.podEvents(t, "startup"), "Unhealthy", "Liveness probe failed") {
		t.Errorf("liveness probe failed before startup succeeded: %q", eventLines(cn.podEvents(t, "startup")))
	}

	p := cn.waitPod(t, cn.ns, "liveness", 90*time.Second, "restarted", func(p *v1.Pod) bool {
		cs := mainStatus(p)
		return cs.RestartCount >= 1 && cs.State.Running != nil
	})
	if last := mainStatus(p).LastTerminationState.Terminated; last == nil {
		t.Errorf("restarted container has no last state: %+v", mainStatus(p))
	}
	evs := cn.podEvents(t, "liveness")
	for _, want := range []struct{ reason, msg string }{
		{"Unhealthy", "Liveness probe failed: "},
		{"Killing", "Container main failed liveness probe, will be restarted"},
	} {
		if !hasEvent(evs, want.reason, want.msg) {
			t.Errorf("no event %s %q in %q", want.reason, want.msg, eventLines(evs))
		}
	}
}

// A readiness probe flips the container's ready flag and the
// pod's ContainersReady and Ready conditions both ways; the results are
// counted on /metrics/probes.
func TestReadinessProbe(t *testing.T) {
	cn := sharedNode(t)
	p := busyboxPod("readiness", sleeper)
	p.Spec.Containers[0].ReadinessProbe = probe(execHandler("test", "-f", "/tmp/ready"))
	cn.createPod(t, p)

	conds := func(p *v1.Pod) (v1.ConditionStatus, v1.ConditionStatus) {
		r, c := condition(p, v1.PodReady), condition(p, v1.ContainersReady)
		if r == nil || c == nil {
			return "", ""
		}
		return r.Status, c.Status
	}
	cn.waitPodEvent(t, "readiness", "Unhealthy", "Readiness probe failed", 60*time.Second)
	notReady := cn.getPod(t, "readiness")
	if r, c := conds(notReady); r != v1.ConditionFalse || c != v1.ConditionFalse || mainStatus(notReady).Ready {
		t.Fatalf("before /tmp/ready: Ready %s, ContainersReady %s, ready %v", r, c, mainStatus(notReady).Ready)
	}
	if msg := condition(notReady, v1.PodReady).Message; msg != "containers with unready status: [main]" {
		t.Errorf("Ready message %q", msg)
	}

	cn.execIn(t, "readiness", "touch", "/tmp/ready")
	cn.waitPod(t, cn.ns, "readiness", 30*time.Second, "Ready", func(p *v1.Pod) bool {
		r, c := conds(p)
		return r == v1.ConditionTrue && c == v1.ConditionTrue && mainStatus(p).Ready
	})
	cn.execIn(t, "readiness", "rm", "/tmp/ready")
	cn.waitPod(t, cn.ns, "readiness", 30*time.Second, "not Ready again", func(p *v1.Pod) bool {
		r, c := conds(p)
		return r == v1.ConditionFalse && c == v1.ConditionFalse && !mainStatus(p).Ready
	})
	if n := mainStatus(cn.getPod(t, "readiness")).RestartCount; n != 0 {
		t.Errorf("a failing readiness probe restarted the container %d times", n)
	}

	resp, err := http.Get(cn.url("/metrics/probes"))
	must(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, result := range []string{"successful", "failed"} {
		want := `prober_probe_total{container="main",namespace="` + cn.ns + `",pod="readiness",pod_uid="`
		found := false
		for _, line := range strings.Split(string(b), "\n") {
			found = found || (strings.Contains(line, want) && strings.Contains(line, `probe_type="Readiness",result="`+result+`"`))
		}
		if !found {
			t.Errorf("/metrics/probes has no %s readiness series of the pod:\n%s", result, b)
		}
	}
}

// httpGet, tcpSocket and grpc probes, each against a real server
// in the container, pass against what is served and fail otherwise with
// upstream's messages; an exec probe that outlives its timeout fails.
func TestProbeHandlers(t *testing.T) {
	cn := sharedNode(t)
	const httpd = "mkdir -p /www && echo ok > /www/healthz && exec httpd -f -p 8080 -h /www"
	web := func(name string, h v1.ProbeHandler) {
		p := busyboxPod(name, httpd)
		p.Spec.Containers[0].Ports = []v1.ContainerPort{{Name: "http", ContainerPort: 8080}}
		p.Spec.Containers[0].ReadinessProbe = probe(h)
		cn.createPod(t, p)
	}
	web("http-ok", v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http"),
		HTTPHeaders: []v1.HTTPHeader{{Name: "X-Probe", Value: "skiff"}}}})
	web("http-missing", v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/missing", Port: intstr.FromInt32(8080)}})
	web("tcp-ok", v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromString("http")}})
	web("tcp-closed", v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(9999)}})
	grpcPod := func(name, service string) {
		p := busyboxPod(name, "")
		c := &p.Spec.Containers[0]
		c.Image, c.Command, c.Args = grpcImage, nil, []string{"-port", "9000", "-not-serving", "down"}
		h := v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 9000}}
		if service != "" {
			h.GRPC.Service = &service
		}
		c.ReadinessProbe = probe(h)
		cn.createPod(t, p)
	}
	grpcPod("grpc-ok", "")
	grpcPod("grpc-down", "down")
	slow := busyboxPod("exec-timeout", sleeper)
	slow.Spec.Containers[0].ReadinessProbe = probe(execHandler("sleep", "5")) // timeoutSeconds 1
	cn.createPod(t, slow)

	for _, name := range []string{"http-ok", "tcp-ok", "grpc-ok"} {
		cn.waitPod(t, cn.ns, name, 60*time.Second, "Ready", isReady)
	}
	for _, bad := range []struct{ pod, msg string }{
		{"http-missing", "Readiness probe failed: HTTP probe failed with statuscode: 404"},
		{"tcp-closed", "connection refused"},
		{"grpc-down", `Readiness probe failed: service unhealthy (responded with "NOT_SERVING")`},
		{"exec-timeout", `Readiness probe failed: command "sleep 5" timed out`},
	} {
		cn.waitPodEvent(t, bad.pod, "Unhealthy", bad.msg, 60*time.Second)
		p := cn.getPod(t, bad.pod)
		if isReady(p) || mainStatus(p).State.Running == nil {
			t.Errorf("%s: ready %v, state %+v; want running and not ready", bad.pod, isReady(p), mainStatus(p).State)
		}
	}
}
