//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Upstream's words for a node shutting down and its pods.
const (
	shutdownNotReady    = "node is shutting down"
	shutdownPodReason   = "Terminated"
	shutdownPodMessage  = "Pod was terminated in response to imminent node shutdown."
	shutdownRefusal     = "NodeShutdown"
	shutdownRefusalText = "Pod was rejected: Pod was rejected as the node is shutting down."
)

// shutdownNode is a private cluster node whose Skiff reaches a fake
// logind on a bus of its own, with extra KubeletConfiguration.
func shutdownNode(t *testing.T, logindDelay time.Duration, config string) (*clusterNode, *fakeLogind) {
	t.Helper()
	cn := newPrivateClusterNode(t)
	bus := startSystemBus(t)
	lg := startFakeLogind(t, bus, logindDelay)
	cn.env = append(cn.env, "DBUS_SYSTEM_BUS_ADDRESS="+bus)
	f, err := os.OpenFile(cn.config, os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteString(config)
	must(t, err)
	must(t, f.Close())
	return cn, lg
}

// waitSkiffLock waits for Skiff to hold logind's delay lock on shutdown.
func waitSkiffLock(t *testing.T, cn *clusterNode, lg *fakeLogind) {
	t.Helper()
	pid := uint32(cn.cmd.Process.Pid)
	waitFor(t, 30*time.Second, "Skiff's inhibitor lock", func() (bool, error) {
		ins := lg.inhibitors()
		if len(ins) == 0 {
			return false, nil
		}
		if len(ins) > 1 {
			return false, fmt.Errorf("want one inhibitor, got %+v", ins)
		}
		in := ins[0]
		if in.What != "shutdown" || in.Mode != "delay" || in.Who != "kubelet" || in.PID != pid {
			return false, fmt.Errorf("inhibitor %+v, want a delay lock on shutdown by kubelet (Skiff, pid %d)", in, pid)
		}
		return true, nil
	})
}

// checkShutdownStatus checks a pod the shutdown stopped: Failed with
// upstream's reason and message and a DisruptionTarget condition.
func checkShutdownStatus(t *testing.T, p *v1.Pod) {
	t.Helper()
	if p.Status.Phase != v1.PodFailed || p.Status.Reason != shutdownPodReason || p.Status.Message != shutdownPodMessage {
		t.Errorf("pod %s: phase %s, reason %q, message %q; want Failed, %q, %q",
			p.Name, p.Status.Phase, p.Status.Reason, p.Status.Message, shutdownPodReason, shutdownPodMessage)
	}
	i := slices.IndexFunc(p.Status.Conditions, func(c v1.PodCondition) bool { return c.Type == v1.DisruptionTarget })
	if i < 0 {
		t.Errorf("pod %s has no DisruptionTarget condition: %+v", p.Name, p.Status.Conditions)
		return
	}
	if c := p.Status.Conditions[i]; c.Status != v1.ConditionTrue || c.Reason != v1.PodReasonTerminationByKubelet || c.Message != shutdownPodMessage {
		t.Errorf("pod %s: DisruptionTarget %+v, want True, %s, %q", p.Name, c, v1.PodReasonTerminationByKubelet, shutdownPodMessage)
	}
}

func waitShutdownStopped(t *testing.T, cn *clusterNode, name string) *v1.Pod {
	t.Helper()
	return cn.waitPod(t, cn.ns, name, 60*time.Second, "stopped by the shutdown", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodFailed && len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Terminated != nil
	})
}

// keepLogindDropIn puts back logind's drop-in directory as it was when
// the test ends: Skiff writes upstream's drop-in into the real one.
func keepLogindDropIn(t *testing.T) string {
	t.Helper()
	const dir = "/etc/systemd/logind.conf.d"
	path := filepath.Join(dir, "99-kubelet.conf")
	_, dirErr := os.Stat(dir)
	old, fileErr := os.ReadFile(path)
	t.Cleanup(func() {
		switch {
		case fileErr == nil:
			_ = os.WriteFile(path, old, 0o644)
		default:
			_ = os.Remove(path)
		}
		if dirErr != nil {
			_ = os.Remove(dir) // only if empty
		}
	})
	return path
}

// TestGracefulShutdownByPodPriority: on logind's PrepareForShutdown the
// pods stop in priority groups, lowest first, each group within its
// budget, even a pod that ignores SIGTERM and asks for more time; they end
// Failed as upstream's do, the node turns NotReady, and Skiff releases its
// inhibitor lock before logind's delay runs out. logind's delay starts
// below the budget, so Skiff raises it through upstream's drop-in.
func TestGracefulShutdownByPodPriority(t *testing.T) {
	dropIn := keepLogindDropIn(t)
	cn, lg := shutdownNode(t, 5*time.Second, `shutdownGracePeriodByPodPriority:
- priority: 0
  shutdownGracePeriodSeconds: 5
- priority: 1000
  shutdownGracePeriodSeconds: 5
- priority: 100000
  shutdownGracePeriodSeconds: 4
`)
	classes := map[string]int32{"mid": 1000, "high": 100000}
	for name, value := range classes {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: cn.ns + "-" + name}, Value: value}
		_, err := cn.admin.SchedulingV1().PriorityClasses().Create(cn.ctx(), pc, metav1.CreateOptions{})
		must(t, err)
		t.Cleanup(func() {
			_ = cn.admin.SchedulingV1().PriorityClasses().Delete(cn.ctx(), pc.Name, metav1.DeleteOptions{})
		})
	}
	cn.start()
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	waitSkiffLock(t, cn, lg)
	if got, want := lg.inhibitDelayMax(), 14*time.Second; got != want {
		t.Errorf("logind's InhibitDelayMaxUSec = %v after Skiff's drop-in, want the budget %v", got, want)
	}
	if b, err := os.ReadFile(dropIn); err != nil || !strings.Contains(string(b), "\nInhibitDelayMaxSec=14\n") {
		t.Errorf("logind drop-in %s: %q, %v; want InhibitDelayMaxSec=14", dropIn, b, err)
	}

	trace, vols, mounts := traceDir(t)
	// Each pod notes its SIGTERM in /trace/order; low-stubborn stays.
	pods := []struct{ name, class, onTerm string }{
		{"low", "", "exit 0"},
		{"low-stubborn", "", ":"},
		{"mid", "mid", "exit 0"},
		{"high", "high", "exit 0"},
	}
	for _, pd := range pods {
		p := busyboxPod(pd.name, fmt.Sprintf("trap 'echo %s >> /trace/order; %s' TERM; while true; do sleep 1 & wait $!; done", pd.name, pd.onTerm))
		p.Spec.TerminationGracePeriodSeconds = new(int64)
		*p.Spec.TerminationGracePeriodSeconds = 30 // more than any group's budget
		if pd.class != "" {
			p.Spec.PriorityClassName = cn.ns + "-" + pd.class
		}
		p.Spec.Volumes, p.Spec.Containers[0].VolumeMounts = vols, mounts
		cn.createPod(t, p)
	}
	for _, pd := range pods {
		cn.waitPod(t, cn.ns, pd.name, 60*time.Second, "running", isReady)
	}

	lg.powerOff()
	if outcome := lg.waitPoweredOff(30 * time.Second); outcome != "released" {
		t.Errorf("logind's delay ended by %q, want Skiff's lock released before it ran out", outcome)
	}
	if ins := lg.inhibitors(); len(ins) != 0 {
		t.Errorf("inhibitors left after the shutdown: %+v", ins)
	}
	cn.waitNodeReady(t, v1.ConditionFalse, 30*time.Second)
	if _, msg := nodeReady(cn.getNode(t)); msg != shutdownNotReady {
		t.Errorf("node NotReady message %q while shutting down, want %q", msg, shutdownNotReady)
	}
	for _, pd := range pods {
		checkShutdownStatus(t, waitShutdownStopped(t, cn, pd.name))
	}
	// The stubborn pod was killed at its group's budget, not after its own 30 s.
	if st := cn.getPod(t, "low-stubborn").Status.ContainerStatuses[0].State.Terminated; st.ExitCode != 137 {
		t.Errorf("low-stubborn exited %d, want 137 (SIGKILL at the end of its budget)", st.ExitCode)
	}
	b, err := os.ReadFile(filepath.Join(trace, "order"))
	must(t, err)
	order := strings.Fields(string(b))
	if len(order) != 4 || !slices.Contains(order[:2], "low") || !slices.Contains(order[:2], "low-stubborn") ||
		order[2] != "mid" || order[3] != "high" {
		t.Errorf("SIGTERM order %v, want low and low-stubborn (either order), then mid, then high", order)
	}
	checkShutdownTimes(t, cn)
}

// checkShutdownTimes checks the shutdown's start and end in upstream's
// state file under the root directory and in its metrics.
func checkShutdownTimes(t *testing.T, cn *clusterNode) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cn.root, "graceful_node_shutdown_state"))
	must(t, err)
	var st struct {
		StartTime time.Time `json:"startTime"`
		EndTime   time.Time `json:"endTime"`
	}
	must(t, json.Unmarshal(b, &st))
	if st.StartTime.IsZero() || st.EndTime.Before(st.StartTime) {
		t.Errorf("shutdown state %s: want a start and an end after it", b)
	}
	mfs, err := scrape(cn.url("/metrics"))
	must(t, err)
	for name, want := range map[string]time.Time{
		"kubelet_graceful_shutdown_start_time_seconds": st.StartTime,
		"kubelet_graceful_shutdown_end_time_seconds":   st.EndTime,
	} {
		if got := gauge(mfs, name, nil); got != float64(want.Unix()) {
			t.Errorf("%s = %v, want %d (the state file's)", name, got, want.Unix())
		}
	}
}

// TestCancelledShutdownBringsNodeBack: while the node shuts down, new pods
// are refused; once logind cancels the shutdown (PrepareForShutdown(false))
// the node is Ready again, Skiff holds a new lock and pods run again.
func TestCancelledShutdownBringsNodeBack(t *testing.T) {
	cn, lg := shutdownNode(t, time.Minute, "shutdownGracePeriod: 6s\nshutdownGracePeriodCriticalPods: 2s\n")
	cn.start()
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	waitSkiffLock(t, cn, lg)
	cn.createPod(t, busyboxPod("before", sleeper))
	cn.waitPod(t, cn.ns, "before", 60*time.Second, "running", isReady)

	lg.powerOff()
	checkShutdownStatus(t, waitShutdownStopped(t, cn, "before"))
	if outcome := lg.waitPoweredOff(30 * time.Second); outcome != "released" {
		t.Errorf("logind's delay ended by %q, want Skiff's lock released before it ran out", outcome)
	}
	cn.waitNodeReady(t, v1.ConditionFalse, 30*time.Second)
	if _, msg := nodeReady(cn.getNode(t)); msg != shutdownNotReady {
		t.Errorf("node NotReady message %q, want %q", msg, shutdownNotReady)
	}
	refused := cn.createPod(t, busyboxPod("refused", sleeper))
	p := cn.waitPod(t, cn.ns, "refused", 30*time.Second, "refused", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if p.Status.Reason != shutdownRefusal || p.Status.Message != shutdownRefusalText {
		t.Errorf("pod created while shutting down: reason %q, message %q; want %q, %q",
			p.Status.Reason, p.Status.Message, shutdownRefusal, shutdownRefusalText)
	}
	if sbs := cn.sandboxesOf(string(refused.UID)); len(sbs) != 0 {
		t.Errorf("the refused pod has %d sandboxes, want none", len(sbs))
	}

	lg.cancel()
	cn.waitNodeReady(t, v1.ConditionTrue, 30*time.Second)
	waitSkiffLock(t, cn, lg)
	cn.createPod(t, busyboxPod("after", sleeper))
	cn.waitPod(t, cn.ns, "after", 60*time.Second, "running", isReady)
}
