//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	internalapi "k8s.io/cri-api/pkg/apis"
)

// freezer freezes and thaws one pod's processes through the freezer of
// its pod cgroup (v1 freezer.state, v2 cgroup.freeze): not the
// container's own cgroup, which runc thaws when it kills the container.
type freezer struct{ file, frozen, thawed string }

func containerFreezer(t *testing.T, rs internalapi.RuntimeService, id string) freezer {
	t.Helper()
	st, err := rs.ContainerStatus(context.Background(), id, true)
	must(t, err)
	var info struct {
		Pid int `json:"pid"`
	}
	must(t, json.Unmarshal([]byte(st.GetInfo()["info"]), &info))
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", info.Pid))
	must(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) != 3 {
			continue
		}
		if strings.Contains(","+f[1]+",", ",freezer,") {
			return freezer{filepath.Join("/sys/fs/cgroup/freezer", filepath.Dir(f[2]), "freezer.state"), "FROZEN", "THAWED"}
		}
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "0::"); ok {
			return freezer{filepath.Join("/sys/fs/cgroup", filepath.Dir(rest), "cgroup.freeze"), "1", "0"}
		}
	}
	t.Fatalf("no freezer cgroup for container %s:\n%s", id, b)
	return freezer{}
}

func (f freezer) set(t *testing.T, v string) {
	t.Helper()
	if err := os.WriteFile(f.file, []byte(v), 0o644); err != nil && !os.IsNotExist(err) {
		t.Errorf("write %s to %s: %v", v, f.file, err)
	}
}

// cycle creates a pod, waits for it to run, deletes it and waits for it
// to be gone; it returns both durations.
func (cn *clusterNode) cycle(t *testing.T, name string) (start, stop time.Duration) {
	t.Helper()
	t0 := time.Now()
	cn.createPod(t, busyboxPod(name, sleeper))
	cn.waitPod(t, cn.ns, name, 120*time.Second, "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	start = time.Since(t0)
	t1 := time.Now()
	must(t, cn.admin.CoreV1().Pods(cn.ns).Delete(cn.ctx(), name, metav1.DeleteOptions{}))
	waitFor(t, 120*time.Second, "pod "+name+" gone", func() (bool, error) {
		_, err := cn.admin.CoreV1().Pods(cn.ns).Get(cn.ctx(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	return start, time.Since(t1)
}

// relists is a sample of the PLEG's relist metrics.
type relists struct {
	sum   float64 // of the relist interval histogram, seconds
	count uint64
	// Event streams opened and broken: with a stream open and none broken,
	// the PLEG follows the runtime's events and relists every 10 s.
	streams, breaks float64
}

func relistSample(t *testing.T, n *node) relists {
	t.Helper()
	mfs, err := scrape(n.url("/metrics"))
	must(t, err)
	var r relists
	for _, m := range series(mfs, "kubelet_pleg_relist_interval_seconds", nil) {
		h := m.GetHistogram()
		r.sum, r.count = r.sum+h.GetSampleSum(), r.count+h.GetSampleCount()
	}
	r.streams = gauge(mfs, "kubelet_evented_pleg_connection_success_count", nil)
	r.breaks = gauge(mfs, "kubelet_evented_pleg_connection_error_count", nil)
	return r
}

// period is the relist period in effect between two samples: 10 s if the
// event stream was open throughout, else 1 s.
func (r relists) period(later relists) time.Duration {
	if r.streams > 0 && later.breaks == r.breaks {
		return 10 * time.Second
	}
	return time.Second
}

// A stuck pod stays that pod's problem: with one pod frozen (its
// processes cannot die) and the pod deleted, the node stays Ready
// for 5 minutes, 20 other pods start and are deleted each within twice
// the usual time, the PLEG relists at its period (1 s, or
// 10 s while it follows the runtime's events), and after the thaw the
// stuck pod goes away. Meanwhile its worker reports the failed kill
// (FailedKillPod) and retries. It runs in the long group, on a node of
// its own: the cycles take about 0.2 s, well inside the bound (at least
// 2 s) whatever the main process runs meanwhile, and the rest is waiting.
func TestStuckPodStaysItsOwnProblem(t *testing.T) {
	quietLong(t)
	cn := newPrivateClusterNode(t)
	cn.appendConfig("runtimeRequestTimeout: 1m\n")
	cn.start()
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)

	// The usual time, measured here, now: the slowest of three cycles.
	var usualStart, usualStop time.Duration
	for i := 0; i < 3; i++ {
		s, d := cn.cycle(t, fmt.Sprintf("warm-%d", i))
		usualStart, usualStop = max(usualStart, s), max(usualStop, d)
	}
	// Without runtime events, starts are seen by the PLEG's relist every
	// second: a usual time below that is polling luck, not a baseline.
	usualStart, usualStop = max(usualStart, time.Second), max(usualStop, time.Second)
	t.Logf("usual: start %v, delete %v", usualStart, usualStop)

	stuck := cn.createPod(t, busyboxPod("stuck", sleeper))
	cn.waitPod(t, cn.ns, "stuck", 60*time.Second, "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	cs := cn.containersOf(string(stuck.UID))
	if len(cs) != 1 {
		t.Fatalf("stuck pod has %d containers", len(cs))
	}
	fz := containerFreezer(t, cn.runtime(), cs[0].Id)
	fz.set(t, fz.frozen)
	thawed := false
	t.Cleanup(func() {
		if !thawed {
			fz.set(t, fz.thawed)
		}
	})
	must(t, cn.admin.CoreV1().Pods(cn.ns).Delete(cn.ctx(), "stuck", metav1.DeleteOptions{}))

	before := relistSample(t, cn.node)
	deadline := time.Now().Add(5 * time.Minute)
	for i := 0; time.Now().Before(deadline); i++ {
		if s, _ := nodeReady(cn.getNode(t)); s != v1.ConditionTrue {
			t.Fatalf("node not Ready %v after the pod got stuck", 5*time.Minute-time.Until(deadline))
		}
		if i < 20 {
			start, stop := cn.cycle(t, fmt.Sprintf("other-%d", i))
			if start > 2*usualStart || stop > 2*usualStop {
				t.Errorf("other-%d: start %v (usual %v), delete %v (usual %v)", i, start, usualStart, stop, usualStop)
			}
			continue
		}
		time.Sleep(5 * time.Second)
	}
	if _, err := cn.admin.CoreV1().Pods(cn.ns).Get(cn.ctx(), "stuck", metav1.GetOptions{}); apierrors.IsNotFound(err) {
		t.Fatal("the frozen pod went away while frozen: the test froze nothing")
	}
	// Its worker timed out on the kill, said so, and tried again.
	var kills int32
	for _, e := range cn.podEvents(t, "stuck") {
		if e.Reason == "FailedKillPod" {
			kills += max(e.Count, 1)
		}
	}
	if kills < 2 {
		t.Errorf("%d FailedKillPod events for the stuck pod; want its worker to report and retry", kills)
	}
	after := relistSample(t, cn.node)
	if after.count <= before.count {
		t.Fatal("no relist in 5 minutes")
	}
	period := before.period(after)
	if mean := (after.sum - before.sum) / float64(after.count-before.count); mean > 1.5*period.Seconds() {
		t.Errorf("mean PLEG relist interval %.2fs over 5 minutes, period %v", mean, period)
	}

	fz.set(t, fz.thawed)
	thawed = true
	waitFor(t, 3*time.Minute, "stuck pod gone after the thaw", func() (bool, error) {
		_, err := cn.admin.CoreV1().Pods(cn.ns).Get(cn.ctx(), "stuck", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}
