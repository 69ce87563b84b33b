//go:build e2e

package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// A break in what the runtime tells Skiff (its event stream, its relists)
// loses no container death: containers killed from outside before
// containerd stops, while it is down, just after it is back and later all
// end up reported in the apiserver with the exit the kill caused, and the
// container nobody killed is still reported running.
func TestNoContainerExitLostAcrossRuntimeRestart(t *testing.T) {
	cn := newClusterNode(t)
	cn.start()
	names := []string{"before", "down-1", "down-2", "after-1", "after-2", "spared"}
	for _, n := range names {
		p := busyboxPod(n, "exec sleep 3600")
		p.Spec.RestartPolicy = v1.RestartPolicyNever
		cn.createPod(t, p)
	}
	pids := map[string]int{}
	for _, n := range names {
		p := cn.waitPod(t, cn.ns, n, 90*time.Second, "ready", isReady)
		pids[n] = containerPid(t, p)
	}
	kill := func(n string) { must(t, syscall.Kill(pids[n], syscall.SIGKILL)) }

	kill("before")
	cn.waitPod(t, cn.ns, "before", 60*time.Second, "exit reported", killedReported)

	stopContainerd(t)
	restarted := false
	defer func() {
		if !restarted {
			startContainerd(t)
		}
	}()
	kill("down-1")
	kill("down-2")
	startContainerd(t)
	restarted = true
	kill("after-1")
	time.Sleep(3 * time.Second) // past the first resync after the restart
	kill("after-2")

	for _, n := range names[1:5] {
		cn.waitPod(t, cn.ns, n, 90*time.Second, "exit reported", killedReported)
	}
	if p := cn.getPod(t, "spared"); !isReady(p) || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil {
		t.Errorf("the container no one killed is not reported running: %+v", p.Status.ContainerStatuses)
	}
}

// killedReported says the pod's one container is reported terminated by
// SIGKILL (exit 137) and the pod, which never restarts, Failed.
func killedReported(p *v1.Pod) bool {
	if p.Status.Phase != v1.PodFailed || len(p.Status.ContainerStatuses) != 1 {
		return false
	}
	term := p.Status.ContainerStatuses[0].State.Terminated
	return term != nil && term.ExitCode == 137
}

// containerPid is the host pid of the pod's one running container.
func containerPid(t *testing.T, p *v1.Pod) int {
	t.Helper()
	if len(p.Status.ContainerStatuses) != 1 {
		t.Fatalf("pod %s has %d container statuses", p.Name, len(p.Status.ContainerStatuses))
	}
	_, id, ok := strings.Cut(p.Status.ContainerStatuses[0].ContainerID, "://")
	if !ok {
		t.Fatalf("pod %s: container ID %q", p.Name, p.Status.ContainerStatuses[0].ContainerID)
	}
	return runtimePid(t, id)
}
