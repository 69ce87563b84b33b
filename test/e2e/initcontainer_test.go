//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// An init container writes a file the app container
// reads; a failing init container with restartPolicy Never fails the pod;
// OnFailure retries it with back-off.
func TestInitContainers(t *testing.T) {
	cn := sharedNode(t)

	p := busyboxPod("init-ok", "cat /work/msg; "+sleeper)
	p.Spec.Volumes = []v1.Volume{{Name: "work", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	mount := []v1.VolumeMount{{Name: "work", MountPath: "/work"}}
	p.Spec.Containers[0].VolumeMounts = mount
	p.Spec.InitContainers = []v1.Container{
		{Name: "first", Image: busybox, ImagePullPolicy: v1.PullNever, VolumeMounts: mount, Command: []string{"sh", "-c", "echo from-first > /work/msg"}},
		// The second sees what the first wrote: they run in order.
		{Name: "second", Image: busybox, ImagePullPolicy: v1.PullNever, VolumeMounts: mount, Command: []string{"sh", "-c", "grep -q from-first /work/msg && echo and-second >> /work/msg"}},
	}
	created := cn.createPod(t, p)

	fail := busyboxPod("init-fail", sleeper)
	fail.Spec.RestartPolicy = v1.RestartPolicyNever
	fail.Spec.InitContainers = []v1.Container{{Name: "broken", Image: busybox, ImagePullPolicy: v1.PullNever, Command: []string{"sh", "-c", "exit 3"}}}
	cn.createPod(t, fail)

	retry := busyboxPod("init-retry", sleeper)
	retry.Spec.RestartPolicy = v1.RestartPolicyOnFailure
	retry.Spec.InitContainers = []v1.Container{{Name: "broken", Image: busybox, ImagePullPolicy: v1.PullNever, Command: []string{"sh", "-c", "exit 3"}}}
	cn.createPod(t, retry)

	ok := cn.waitPod(t, cn.ns, "init-ok", 60*time.Second, "ready", isReady)
	for _, ic := range ok.Status.InitContainerStatuses {
		if term := ic.State.Terminated; term == nil || term.ExitCode != 0 || term.Reason != "Completed" {
			t.Errorf("init container %s: %+v, want terminated Completed", ic.Name, ic.State)
		}
	}
	if c := condition(ok, v1.PodInitialized); c == nil || c.Status != v1.ConditionTrue {
		t.Errorf("Initialized condition = %+v", c)
	}
	first, second := ok.Status.InitContainerStatuses[0].State.Terminated, ok.Status.InitContainerStatuses[1].State.Terminated
	if second.StartedAt.Before(&first.FinishedAt) {
		t.Errorf("second init container started (%v) before the first finished (%v)", second.StartedAt, first.FinishedAt)
	}
	lines := containerLogLines(t, filepath.Join(podLogsRoot, cn.ns+"_init-ok_"+string(created.UID), "main", "0.log"))
	if strings.Join(lines, ",") != "from-first,and-second" {
		t.Errorf("app container read %q, want from-first,and-second", lines)
	}

	failed := cn.waitPod(t, cn.ns, "init-fail", 60*time.Second, "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if term := failed.Status.InitContainerStatuses[0].State.Terminated; term == nil || term.ExitCode != 3 || term.Reason != "Error" {
		t.Errorf("failed init container status: %+v", failed.Status.InitContainerStatuses[0].State)
	}
	if w := failed.Status.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "PodInitializing" {
		t.Errorf("app container of a pod whose init failed: %+v, want waiting PodInitializing", failed.Status.ContainerStatuses[0].State)
	}
	if c := condition(failed, v1.PodInitialized); c == nil || c.Status != v1.ConditionFalse {
		t.Errorf("Initialized condition of the failed pod = %+v", c)
	}
	if n := len(containersOf(t, string(failed.UID))); n != 1 {
		t.Errorf("a failed init container with restartPolicy Never must not run again: %d containers", n)
	}

	// OnFailure: the first restart is immediate, then the back-off shows.
	retried := cn.waitPod(t, cn.ns, "init-retry", 60*time.Second, "init container in CrashLoopBackOff", func(p *v1.Pod) bool {
		ic := p.Status.InitContainerStatuses[0]
		return ic.RestartCount >= 1 && ic.State.Waiting != nil && ic.State.Waiting.Reason == "CrashLoopBackOff"
	})
	if retried.Status.Phase != v1.PodPending {
		t.Errorf("phase of a pod whose init container is retried = %s, want Pending", retried.Status.Phase)
	}
	if last := retried.Status.InitContainerStatuses[0].LastTerminationState.Terminated; last == nil || last.ExitCode != 3 {
		t.Errorf("lastState of the retried init container: %+v", last)
	}
}

// Sidecars (init containers with restartPolicy Always) start before the
// next init container, outlive the init containers, and are stopped after
// the app containers: in reverse order on deletion, and once the app
// containers are done for a pod that does not restart them, with the pod
// reported Succeeded only after that.
func TestSidecars(t *testing.T) {
	cn := sharedNode(t)
	dir, vol, mount := traceDir(t)
	always := v1.ContainerRestartPolicyAlways
	// A sidecar notes its start, and its SIGTERM, in the pod's trace file.
	side := func(pod, name string) v1.Container {
		return v1.Container{Name: name, Image: busybox, ImagePullPolicy: v1.PullNever, RestartPolicy: &always, VolumeMounts: mount,
			Command: []string{"sh", "-c", "echo " + name + "-start >> /trace/" + pod + "; trap 'echo " + name + "-term >> /trace/" + pod + "; exit 0' TERM; while true; do sleep 0.2; done"}}
	}
	trace := func(pod string) string {
		b, _ := os.ReadFile(filepath.Join(dir, pod))
		return strings.Join(strings.Fields(string(b)), ",")
	}

	// restartPolicy Never: the app container finishes, then the sidecar is
	// stopped, then the pod is Succeeded.
	done := busyboxPod("sc-done", "sleep 2; echo app-exit >> /trace/sc-done")
	done.Spec.RestartPolicy = v1.RestartPolicyNever
	done.Spec.Volumes = vol
	done.Spec.Containers[0].VolumeMounts = mount
	done.Spec.InitContainers = []v1.Container{
		side("sc-done", "side"),
		// Finishes only while the sidecar runs beside it.
		{Name: "setup", Image: busybox, ImagePullPolicy: v1.PullNever, VolumeMounts: mount,
			Command: []string{"sh", "-c", "until grep -q side-start /trace/sc-done; do sleep 0.1; done; echo setup-done >> /trace/sc-done"}},
	}
	cn.createPod(t, done)
	var sawRunningSidecar bool
	final := cn.waitPod(t, cn.ns, "sc-done", 60*time.Second, "Succeeded", func(p *v1.Pod) bool {
		if len(p.Status.InitContainerStatuses) == 0 {
			return false
		}
		sc := p.Status.InitContainerStatuses[0]
		if sc.State.Running != nil && p.Status.InitContainerStatuses[1].State.Terminated != nil {
			sawRunningSidecar = true // it outlives the init container
		}
		if p.Status.Phase == v1.PodSucceeded && sc.State.Running != nil {
			t.Errorf("phase Succeeded while the sidecar still runs")
		}
		return p.Status.Phase == v1.PodSucceeded
	})
	if !sawRunningSidecar {
		t.Error("never saw the sidecar running after the init container finished")
	}
	if got := trace("sc-done"); got != "side-start,setup-done,app-exit,side-term" {
		t.Errorf("trace = %s, want side-start,setup-done,app-exit,side-term", got)
	}
	app, sc := final.Status.ContainerStatuses[0].State.Terminated, final.Status.InitContainerStatuses[0].State.Terminated
	if app == nil || sc == nil || sc.FinishedAt.Before(&app.FinishedAt) {
		t.Errorf("the sidecar must finish after the app: app %+v, sidecar %+v", app, sc)
	}

	// Deletion stops the app container first, then sidecars last-declared
	// first.
	del := busyboxPod("sc-del", "trap 'echo app-term >> /trace/sc-del; exit 0' TERM; while true; do sleep 0.2; done")
	del.Spec.Volumes = vol
	del.Spec.Containers[0].VolumeMounts = mount
	del.Spec.InitContainers = []v1.Container{side("sc-del", "one"), side("sc-del", "two")}
	cn.createPod(t, del)
	ready := cn.waitPod(t, cn.ns, "sc-del", 60*time.Second, "ready", isReady)
	waitFor(t, 10*time.Second, "both sidecars noted their start", func() (bool, error) {
		return strings.Count(trace("sc-del"), "-start") == 2, nil
	})
	one, two := ready.Status.InitContainerStatuses[0].State.Running, ready.Status.InitContainerStatuses[1].State.Running
	if one == nil || two == nil || two.StartedAt.Before(&one.StartedAt) {
		t.Errorf("sidecars must start in order and keep running: %+v %+v", one, two)
	}
	must(t, cn.admin.CoreV1().Pods(cn.ns).Delete(cn.ctx(), "sc-del", metav1.DeleteOptions{}))
	waitFor(t, 60*time.Second, "sc-del stopped", func() (bool, error) {
		return strings.Count(trace("sc-del"), "-term") == 3, nil
	})
	if got := trace("sc-del"); !strings.HasSuffix(got, ",app-term,two-term,one-term") {
		t.Errorf("stop order = %s, want app-term,two-term,one-term after the starts", got)
	}
}

func condition(p *v1.Pod, t v1.PodConditionType) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}
