//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// What a container writes to its terminationMessagePath (the
// default one, or its own, as root or not) is its terminated message;
// with FallbackToLogsOnError a failed container that wrote nothing there
// gets the end of its log; a container that succeeded does not.
func TestTerminationMessages(t *testing.T) {
	cn := sharedNode(t)

	once := func(name, script string, edit func(c *v1.Container)) {
		p := busyboxPod(name, script)
		p.Spec.RestartPolicy = v1.RestartPolicyNever
		if edit != nil {
			edit(&p.Spec.Containers[0])
		}
		cn.createPod(t, p)
	}
	once("tm-default", "echo -n 'all done' > /dev/termination-log; echo some output", nil)
	uid := int64(1000)
	once("tm-path", "echo 'custom path, as user 1000' > /tmp/msg; exit 3", func(c *v1.Container) {
		c.TerminationMessagePath = "/tmp/msg"
		c.SecurityContext = &v1.SecurityContext{RunAsUser: &uid}
	})
	once("tm-fallback", "for i in $(seq 1 100); do echo out $i; done; sleep 1; echo the error >&2; exit 2", func(c *v1.Container) {
		c.TerminationMessagePolicy = v1.TerminationMessageFallbackToLogsOnError
	})
	once("tm-fallback-file", "echo -n 'from the file' > /dev/termination-log; echo from the log; exit 1", func(c *v1.Container) {
		c.TerminationMessagePolicy = v1.TerminationMessageFallbackToLogsOnError
	})
	once("tm-fallback-ok", "echo only a log line", func(c *v1.Container) {
		c.TerminationMessagePolicy = v1.TerminationMessageFallbackToLogsOnError
	})

	terminated := func(name string, phase v1.PodPhase) *v1.ContainerStateTerminated {
		t.Helper()
		p := cn.waitPod(t, cn.ns, name, 60*time.Second, string(phase), func(p *v1.Pod) bool {
			return p.Status.Phase == phase && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Terminated != nil
		})
		return p.Status.ContainerStatuses[0].State.Terminated
	}
	if term := terminated("tm-default", v1.PodSucceeded); term.Message != "all done" || term.Reason != "Completed" {
		t.Errorf("default path: reason %q message %q, want Completed %q", term.Reason, term.Message, "all done")
	}
	if term := terminated("tm-path", v1.PodFailed); term.Message != "custom path, as user 1000\n" || term.Reason != "Error" || term.ExitCode != 3 {
		t.Errorf("own path: exit %d reason %q message %q", term.ExitCode, term.Reason, term.Message)
	}
	term := terminated("tm-fallback", v1.PodFailed)
	// The last 80 lines of the log (both streams): out 22..100 and the error.
	msg := term.Message
	if !strings.Contains(msg, "out 100\n") || !strings.Contains(msg, "the error\n") || !strings.Contains(msg, "out 22\n") ||
		strings.Contains(msg, "\nout 21\n") || strings.HasPrefix(msg, "out 21\n") || len(msg) > 2048 {
		t.Errorf("fallback to logs: message %q", msg)
	}
	if term := terminated("tm-fallback-file", v1.PodFailed); term.Message != "from the file" {
		t.Errorf("fallback with a message written: %q, want the file's", term.Message)
	}
	if term := terminated("tm-fallback-ok", v1.PodSucceeded); term.Message != "" {
		t.Errorf("fallback of a container that succeeded: %q, want none", term.Message)
	}
}

// A pod running longer than its activeDeadlineSeconds is stopped
// and ends Failed with reason DeadlineExceeded and an Event; a pod within
// its deadline runs on.
func TestActiveDeadlineSeconds(t *testing.T) {
	cn := sharedNode(t)
	short, long := int64(5), int64(3600)
	p := busyboxPod("deadline", sleeper)
	p.Spec.ActiveDeadlineSeconds = &short
	cn.createPod(t, p)
	q := busyboxPod("within", sleeper)
	q.Spec.ActiveDeadlineSeconds = &long
	cn.createPod(t, q)

	got := cn.waitPod(t, cn.ns, "deadline", 90*time.Second, "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	const msg = "Pod was active on the node longer than the specified deadline"
	if got.Status.Reason != "DeadlineExceeded" || got.Status.Message != msg {
		t.Errorf("reason %q message %q", got.Status.Reason, got.Status.Message)
	}
	for _, c := range got.Status.Conditions {
		if c.Type == v1.DisruptionTarget {
			t.Errorf("a pod past its deadline has a DisruptionTarget condition: %+v", c)
		}
	}
	cn.waitEvent(t, "DeadlineExceeded", msg)
	final := cn.waitPod(t, cn.ns, "deadline", 30*time.Second, "container terminated", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Terminated != nil
	})
	term := final.Status.ContainerStatuses[0].State.Terminated
	// Not stopped before its deadline (both times have second precision).
	if start := final.Status.StartTime; start == nil || term.FinishedAt.Time.Before(start.Add(time.Duration(short)*time.Second)) {
		t.Errorf("stopped at %v, started at %v: before the %ds deadline", term.FinishedAt, start, short)
	}
	waitFor(t, 30*time.Second, "the pod's containers stopped", func() (bool, error) {
		for _, c := range containersOf(t, string(got.UID)) {
			if c.State.String() == "CONTAINER_RUNNING" {
				return false, nil
			}
		}
		return true, nil
	})
	if w := cn.getPod(t, "within"); w.Status.Phase != v1.PodRunning {
		t.Errorf("the pod within its deadline is %s (%s)", w.Status.Phase, w.Status.Reason)
	}
}
