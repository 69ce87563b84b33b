//go:build e2e

package e2e

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// postStart runs after the container starts and preStop before
// it is signalled, as exec and httpGet actions; a failing postStart kills
// the container with FailedPostStartHook and it is restarted.
func TestLifecycleHooks(t *testing.T) {
	cn := sharedNode(t)

	// Hook calls reach a server of the test on the node's address.
	var mu sync.Mutex
	var calls []string
	l, err := net.Listen("tcp", net.JoinHostPort(cn.c.Options().AdvertiseAddress, "0"))
	must(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls = append(calls, r.URL.Path+" "+r.UserAgent())
		mu.Unlock()
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })
	got := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(calls)
	}
	host, port, _ := net.SplitHostPort(l.Addr().String())

	dir, vol, mount := traceDir(t)
	trace := func() []string {
		b, _ := os.ReadFile(filepath.Join(dir, "log"))
		return strings.Fields(string(b))
	}
	p := busyboxPod("hooks", "echo main >> /trace/log; trap 'echo term >> /trace/log; exit 0' TERM; while true; do sleep 0.2; done")
	p.Spec.Volumes, p.Spec.Containers[0].VolumeMounts = vol, mount
	p.Spec.Containers[0].Lifecycle = &v1.Lifecycle{
		PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", "echo poststart >> /trace/log"}}},
		PreStop:   &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", "echo prestop >> /trace/log"}}},
	}
	cn.createPod(t, p)

	httpHook := func(path string) *v1.LifecycleHandler {
		return &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Host: host, Port: intstr.Parse(port), Path: path}}
	}
	hp := busyboxPod("hooks-http", sleeper)
	hp.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PostStart: httpHook("/poststart"), PreStop: httpHook("/prestop")}
	cn.createPod(t, hp)

	// A postStart that never ends does not keep the pod from being deleted.
	stuck := busyboxPod("hooks-stuck", sleeper)
	stuck.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sleep", "3600"}}}}
	stuckUID := string(cn.createPod(t, stuck).UID)

	fail := busyboxPod("hooks-fail", sleeper)
	fail.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", "exit 3"}}}}
	cn.createPod(t, fail)

	cn.waitPod(t, cn.ns, "hooks", 60*time.Second, "Ready", isReady)
	cn.waitPod(t, cn.ns, "hooks-http", 60*time.Second, "Ready", isReady)
	if tr := trace(); !slices.Contains(tr, "poststart") || !slices.Contains(tr, "main") {
		t.Errorf("trace of a running pod %q: want poststart and main", tr)
	}
	if c := got(); !slices.Equal(c, []string{"/poststart kube-lifecycle/1.34"}) {
		t.Errorf("hook server got %q, want the postStart call", c)
	}

	// postStart failing: the event, the kill, and a restart.
	cn.waitPodEvent(t, "hooks-fail", "FailedPostStartHook", "PostStartHook failed", 60*time.Second)
	cn.waitPodEvent(t, "hooks-fail", "Killing", "FailedPostStartHook", 30*time.Second)
	cn.waitPod(t, cn.ns, "hooks-fail", 60*time.Second, "restarted", func(p *v1.Pod) bool {
		return mainStatus(p).RestartCount >= 1
	})

	// preStop: before the container gets its SIGTERM.
	waitFor(t, 30*time.Second, "hooks-stuck's container running its postStart", func() (bool, error) {
		for _, c := range containersOf(t, stuckUID) {
			if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				return true, nil
			}
		}
		return false, nil
	})
	deleted := []string{"hooks", "hooks-http", "hooks-stuck"}
	for _, name := range deleted {
		must(t, cn.admin.CoreV1().Pods(cn.ns).Delete(cn.ctx(), name, metav1.DeleteOptions{}))
	}
	for _, name := range deleted {
		waitFor(t, 60*time.Second, "pod "+name+" gone", func() (bool, error) {
			_, err := cn.admin.CoreV1().Pods(cn.ns).Get(cn.ctx(), name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	}
	tr := trace()
	pre, term := slices.Index(tr, "prestop"), slices.Index(tr, "term")
	if pre < 0 || term < 0 || pre > term {
		t.Errorf("trace %q: want prestop before term", tr)
	}
	if c := got(); !slices.Equal(c, []string{"/poststart kube-lifecycle/1.34", "/prestop kube-lifecycle/1.34"}) {
		t.Errorf("hook server got %q, want postStart then preStop", c)
	}
	if evs := cn.podEvents(t, "hooks"); hasEvent(evs, "FailedPreStopHook", "") || hasEvent(evs, "FailedPostStartHook", "") {
		t.Errorf("hooks that succeeded reported failures: %s", fmt.Sprint(eventLines(evs)))
	}
}

// A preStop sleep action holds the container's SIGTERM back for
// its seconds, within the grace period.
func TestPreStopSleepHook(t *testing.T) {
	cn := sharedNode(t)

	dir, vol, mount := traceDir(t)
	p := busyboxPod("hooks-sleep", "trap 'date +%s > /trace/term; exit 0' TERM; while true; do sleep 0.2; done")
	p.Spec.Volumes, p.Spec.Containers[0].VolumeMounts = vol, mount
	p.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 5}}}
	grace := int64(30) // the sleep fits in it
	p.Spec.TerminationGracePeriodSeconds = &grace
	cn.createPod(t, p)
	cn.waitPod(t, cn.ns, "hooks-sleep", 60*time.Second, "Ready", isReady)

	deleted := time.Now()
	must(t, cn.admin.CoreV1().Pods(cn.ns).Delete(cn.ctx(), "hooks-sleep", metav1.DeleteOptions{}))
	waitFor(t, 60*time.Second, "pod hooks-sleep gone", func() (bool, error) {
		_, err := cn.admin.CoreV1().Pods(cn.ns).Get(cn.ctx(), "hooks-sleep", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	b, err := os.ReadFile(filepath.Join(dir, "term"))
	if err != nil {
		t.Fatalf("the container never got its SIGTERM: %v", err)
	}
	var term int64
	if _, err := fmt.Sscan(string(b), &term); err != nil {
		t.Fatalf("term time %q: %v", b, err)
	}
	// date +%s has whole seconds: the SIGTERM came at least 4 s after the
	// delete (5 s of sleep), and well within the 30 s grace period.
	if d := term - deleted.Unix(); d < 4 || d > 20 {
		t.Errorf("SIGTERM %d s after the delete, want about 5 s (the preStop sleep)", d)
	}
}
