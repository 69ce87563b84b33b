//go:build e2e

package e2e

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/internal/podstartup"
)

// With --pod-startup-breakdown-events a pod that starts gets one
// PodStartupBreakdown Event saying where its start-up time went, with every
// phase of a real start on containerd and phases that add up to no more
// than the total.
func TestPodStartupBreakdownEvent(t *testing.T) {
	cn := newPrivateClusterNode(t)
	cn.start("--pod-startup-breakdown-events")
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	cn.createPod(t, busyboxPod("bd", sleeper))
	cn.waitPod(t, cn.ns, "bd", 60*time.Second, "ready", isReady)

	var events []v1.Event
	waitFor(t, 20*time.Second, "a PodStartupBreakdown event", func() (bool, error) {
		l, err := cn.admin.CoreV1().Events(cn.ns).List(cn.ctx(), metav1.ListOptions{FieldSelector: "reason=" + podstartup.EventReason})
		if err != nil {
			return false, nil
		}
		events = l.Items
		return len(events) > 0, nil
	})
	time.Sleep(2 * time.Second) // a second event would have come by now
	l, err := cn.admin.CoreV1().Events(cn.ns).List(cn.ctx(), metav1.ListOptions{FieldSelector: "reason=" + podstartup.EventReason})
	must(t, err)
	if len(l.Items) != 1 || l.Items[0].Count > 1 {
		t.Fatalf("want exactly one %s event, got %d: %+v", podstartup.EventReason, len(l.Items), l.Items)
	}
	e := l.Items[0]
	if e.InvolvedObject.Name != "bd" || e.Type != v1.EventTypeNormal {
		t.Errorf("event about %s of type %s", e.InvolvedObject.Name, e.Type)
	}
	total, phases, err := podstartup.ParseMessage(e.Message)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("breakdown: %s", e.Message)
	var sum time.Duration
	for _, k := range []string{"admission", "queue", "volumes", "sandbox", "image(main)", "create(main)", "start(main)", "readiness"} {
		d, ok := phases[k]
		if !ok {
			t.Errorf("phase %s missing from %q", k, e.Message)
		}
		sum += d
	}
	// A real sandbox (pause container plus CNI) and container start take
	// time; the phases are sequential, so they cannot exceed the total.
	if phases["sandbox"] <= 0 || phases["start(main)"] <= 0 || total <= 0 {
		t.Errorf("implausible breakdown %q", e.Message)
	}
	if sum > total+time.Millisecond {
		t.Errorf("phases add up to %s, more than the total %s: %q", sum, total, e.Message)
	}
}
