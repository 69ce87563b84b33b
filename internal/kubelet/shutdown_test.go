package kubelet

import (
	"context"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"

	"github.com/skiff-sh/skiff/internal/shutdown"
)

// testLogind is logind for the Kubelet in-process: a delay that covers
// any budget, locks the test can see, signals the test sends.
type testLogind struct {
	events chan bool
	mu     sync.Mutex
	held   int
}

type testLock struct{ l *testLogind }

func (x testLock) Close() error { x.l.mu.Lock(); x.l.held--; x.l.mu.Unlock(); return nil }

func (l *testLogind) InhibitDelayMax(context.Context) (time.Duration, error) { return time.Hour, nil }
func (l *testLogind) Reload(context.Context) error                           { return nil }
func (l *testLogind) Close() error                                           { return nil }
func (l *testLogind) PrepareForShutdown(context.Context) (<-chan bool, error) {
	return l.events, nil
}

func (l *testLogind) Inhibit(context.Context) (io.Closer, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held++
	return testLock{l}, nil
}

func (l *testLogind) locks() int { l.mu.Lock(); defer l.mu.Unlock(); return l.held }

func (m *machine) nodeReady() (v1.ConditionStatus, string) {
	n, err := m.client.CoreV1().Nodes().Get(context.Background(), testNode, metav1.GetOptions{})
	if err != nil {
		return "", ""
	}
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status, c.Message
		}
	}
	return "", ""
}

// On logind's PrepareForShutdown the pods end Failed as upstream's do,
// the node turns NotReady, new pods are refused and the lock goes; a
// cancellation brings the node and admission back with a new lock.
func TestNodeShutdownFailsPodsAndRefusesNew(t *testing.T) {
	m := newMachine(t)
	lg := &testLogind{events: make(chan bool)}
	m.logind = func(context.Context) (shutdown.Logind, error) { return lg, nil }
	m.tune = func(kc *kubeletconfig.KubeletConfiguration) {
		kc.ShutdownGracePeriod = metav1.Duration{Duration: 10 * time.Second}
		kc.ShutdownGracePeriodCriticalPods = metav1.Duration{Duration: 5 * time.Second}
	}
	m.start()
	m.createPod(newPod("web"))
	m.waitPod("web", "running", running)
	m.eventually("the node Ready", func() bool { s, _ := m.nodeReady(); return s == v1.ConditionTrue })
	m.eventually("the inhibitor lock taken", func() bool { return lg.locks() == 1 })

	lg.events <- true
	p := m.waitPod("web", "failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if p.Status.Reason != shutdown.Reason || p.Status.Message != shutdown.Message {
		t.Errorf("status reason %q message %q, want %q %q", p.Status.Reason, p.Status.Message, shutdown.Reason, shutdown.Message)
	}
	if i := slices.IndexFunc(p.Status.Conditions, func(c v1.PodCondition) bool { return c.Type == v1.DisruptionTarget }); i < 0 ||
		p.Status.Conditions[i].Reason != v1.PodReasonTerminationByKubelet || p.Status.Conditions[i].Message != shutdown.Message {
		t.Errorf("conditions %+v, want DisruptionTarget by the kubelet", p.Status.Conditions)
	}
	m.eventually("the node NotReady", func() bool {
		s, msg := m.nodeReady()
		return s == v1.ConditionFalse && msg == "node is shutting down"
	})
	m.eventually("the lock released", func() bool { return lg.locks() == 0 })
	m.createPod(newPod("late"))
	late := m.waitPod("late", "refused", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if late.Status.Reason != shutdown.NotAdmittedReason || late.Status.Message != "Pod was rejected: "+shutdown.NotAdmittedMessage {
		t.Errorf("late pod reason %q message %q", late.Status.Reason, late.Status.Message)
	}
	if sbs := m.sandboxes(late.UID); len(sbs) != 0 {
		t.Errorf("a refused pod got sandboxes: %v", sbs)
	}

	lg.events <- false
	m.eventually("the node Ready again", func() bool { s, _ := m.nodeReady(); return s == v1.ConditionTrue })
	m.eventually("a new lock", func() bool { return lg.locks() == 1 })
	m.createPod(newPod("after"))
	m.waitPod("after", "running", running)
}
