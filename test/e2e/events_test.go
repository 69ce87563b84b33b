//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Upstream's evented PLEG metrics, which Skiff keeps: streams that became
// healthy, streams that broke or were refused, and one latency sample per
// runtime event received.
const (
	eventedConn    = "kubelet_evented_pleg_connection_success_count"
	eventedConnErr = "kubelet_evented_pleg_connection_error_count"
	eventLatency   = "kubelet_evented_pleg_connection_latency_seconds"
)

// runtimeStreamsEvents says whether the dev runtime has CRI
// GetContainerEvents: containerd has it from 1.7 on.
func runtimeStreamsEvents(t *testing.T) bool {
	t.Helper()
	v, err := runtimeSvc.Version(context.Background(), "v1")
	must(t, err)
	parts := strings.SplitN(strings.TrimPrefix(v.RuntimeVersion, "v"), ".", 3)
	if v.RuntimeName != "containerd" || len(parts) < 2 {
		t.Fatalf("unknown runtime %s %s", v.RuntimeName, v.RuntimeVersion)
	}
	major, _ := strconv.Atoi(parts[0])
	minor, _ := strconv.Atoi(parts[1])
	t.Logf("runtime: %s %s", v.RuntimeName, v.RuntimeVersion)
	return major > 1 || minor >= 7
}

// neverRestarting starts n pods that sleep and are never restarted, waits
// until they are Ready and returns them with their container's ID and
// host pid.
func neverRestarting(t *testing.T, cn *clusterNode, prefix string, n int) (names, ids []string, pids []int) {
	t.Helper()
	for i := 0; i < n; i++ {
		p := busyboxPod(fmt.Sprintf("%s-%d", prefix, i), "exec sleep 3600")
		p.Spec.RestartPolicy = v1.RestartPolicyNever
		cn.createPod(t, p)
		names = append(names, p.Name)
	}
	for _, name := range names {
		p := cn.waitPod(t, cn.ns, name, 90*time.Second, "ready", isReady)
		id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
		ids = append(ids, id)
		pids = append(pids, runtimePidIn(t, cn.runtime(), id))
	}
	return names, ids, pids
}

// waitKillReported waits until the apiserver shows the pod's container
// terminated and the pod Failed, and returns when it saw that and the
// exit code reported.
func waitKillReported(t *testing.T, cn *clusterNode, name string) (time.Time, int32) {
	t.Helper()
	p := cn.waitPod(t, cn.ns, name, 90*time.Second, "the kill reported", func(p *v1.Pod) bool {
		if p.Status.Phase != v1.PodFailed || len(p.Status.ContainerStatuses) != 1 {
			return false
		}
		return p.Status.ContainerStatuses[0].State.Terminated != nil
	})
	return time.Now(), p.Status.ContainerStatuses[0].State.Terminated.ExitCode
}

// eventedMetrics scrapes the evented PLEG's counters from /metrics.
func eventedMetrics(t *testing.T, cn *clusterNode) (conns, errs float64, events uint64) {
	t.Helper()
	mfs, err := scrape(cn.url("/metrics"))
	must(t, err)
	return gauge(mfs, eventedConn, nil), gauge(mfs, eventedConnErr, nil), histCount(mfs, eventLatency, nil)
}

// A container killed from outside (kill -9 of its host pid) is reported
// to the apiserver as terminated with exit code 137. On a runtime with
// CRI events Skiff learns of it from the event stream; on containerd 1.6
// (GetContainerEvents unimplemented) from its relist.
func TestExternalKillReported(t *testing.T) {
	evented := runtimeStreamsEvents(t)
	cn := sharedNode(t)
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	names, _, pids := neverRestarting(t, cn, "killed", 3)

	if evented {
		waitFor(t, 30*time.Second, "a healthy event stream", func() (bool, error) {
			conns, _, _ := eventedMetrics(t, cn)
			return conns >= 1, nil
		})
	}
	_, _, before := eventedMetrics(t, cn)
	for i, name := range names {
		killed := time.Now()
		must(t, syscall.Kill(pids[i], syscall.SIGKILL))
		seen, code := waitKillReported(t, cn, name)
		if code != 137 {
			t.Errorf("%s: exit code %d reported, want 137 (SIGKILL)", name, code)
		}
		t.Logf("%s: kill -> status in the apiserver (polled) %v", name, seen.Sub(killed).Round(time.Millisecond))
	}
	conns, errs, after := eventedMetrics(t, cn)
	if evented {
		// Each kill is at least one runtime event (the container stopped).
		if after-before < uint64(len(names)) || conns < 1 {
			t.Errorf("runtime events received during the kills: %d, healthy streams %v; want at least %d and 1", after-before, conns, len(names))
		}
	} else if conns != 0 || errs < 1 || after != 0 {
		t.Errorf("on a runtime without events: %v healthy streams, %v errors, %d events; want 0, at least 1, 0", conns, errs, after)
	}
}

// The event stream broken by a restart of containerd while pods run: a
// container that exited just before the restart, one killed while
// containerd is down, one right after it is back and one once Skiff has
// resubscribed are all reported; none is lost with the stream. It
// restarts the dev containerd through hack/containerd.sh, so it runs
// alone. (On a private 1.6 runtime, restarted as soon as its CRI plugin
// answers, the kill right after the restart was never reported: not
// looked into yet.)
func TestEventStreamBreakLosesNoStatus(t *testing.T) {
	evented := runtimeStreamsEvents(t)
	cn := newClusterNode(t)
	cn.start()
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	names, ids, pids := neverRestarting(t, cn, "broken", 4)
	if evented {
		waitFor(t, 30*time.Second, "a healthy event stream", func() (bool, error) {
			conns, _, _ := eventedMetrics(t, cn)
			return conns >= 1, nil
		})
	}
	must(t, syscall.Kill(pids[0], syscall.SIGKILL))
	// The first exit is the runtime's before it stops: containerd 1.6
	// loses an exit that lands while it shuts down, and then reports the
	// container's state unknown, which kubelets restart whatever the
	// policy (upstream's ShouldContainerBeRestarted).
	waitFor(t, 30*time.Second, "the runtime to record the first exit", func() (bool, error) {
		st, err := cn.runtime().ContainerStatus(context.Background(), ids[0], false)
		return err == nil && st.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_EXITED, nil
	})
	cn.stopRuntime(t)
	must(t, syscall.Kill(pids[1], syscall.SIGKILL))
	cn.startRuntime(t)
	must(t, syscall.Kill(pids[2], syscall.SIGKILL))
	if evented {
		waitFor(t, 60*time.Second, "a resubscribed event stream", func() (bool, error) {
			conns, errs, _ := eventedMetrics(t, cn)
			return conns >= 2 && errs >= 1, nil
		})
	}
	must(t, syscall.Kill(pids[3], syscall.SIGKILL))
	// Every exit the runtime records is reported. Its code is the
	// runtime's: containerd records one that lands while it is down as it
	// recovers, not necessarily as 137; that is logged, not asserted.
	var lost []string
	for i, name := range names {
		if !runtimeRecordsExit(t, cn, ids[i], pids[i]) {
			lost = append(lost, name)
			continue
		}
		_, code := waitKillReported(t, cn, name)
		if code == 0 {
			t.Errorf("%s: reported as a success after its kill", name)
		}
		if code != 137 && i != 1 {
			t.Errorf("%s: exit code %d reported, want 137 (SIGKILL)", name, code)
		}
		t.Logf("%s: exit code %d reported", name, code)
	}
	if len(lost) > 0 && !t.Failed() {
		// A kubelet reports what its runtime knows; upstream's would show
		// these containers running too.
		t.Skipf("the runtime lost the exit of %v (its process is gone, CRI still says running): "+
			"a containerd 1.6 fault, not one Skiff can see", lost)
	}
}

// runtimeRecordsExit waits for the runtime to record a killed container's
// exit. It says false when the runtime still calls the container running
// 60 s after its process is gone: the runtime lost the exit.
func runtimeRecordsExit(t *testing.T, cn *clusterNode, id string, pid int) bool {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		// Errors are retried: a restarted containerd answers "not
		// initialized" while its CRI plugin recovers.
		st, err := cn.runtime().ContainerStatus(context.Background(), id, false)
		if err == nil && st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
			return true
		}
		time.Sleep(200 * time.Millisecond)
	}
	if syscall.Kill(pid, 0) == nil {
		t.Fatalf("container %s: its process %d still runs 60s after SIGKILL", id, pid)
	}
	return false
}
