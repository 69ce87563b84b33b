//go:build e2e

package e2e

import (
	"context"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// kubectl logs through the apiserver and Skiff's
// /containerLogs, with --previous, --tail, --timestamps, --since and -f.
func TestKubectlLogs(t *testing.T) {
	cn := sharedNode(t)
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)

	// The first run leaves a mark in its emptyDir and fails; the second
	// (after the crash back-off) prints five lines and stays.
	chatty := busyboxPod("chatty", `if [ -f /data/second ]; then
  for i in 0 1 2 3 4; do echo second-$i; done; `+sleeper+`
else touch /data/second; echo first-run; exit 1; fi`)
	chatty.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	chatty.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	follow := busyboxPod("follow", `for i in 1 2 3 4; do echo tick-$i; sleep 1; done`)
	follow.Spec.RestartPolicy = v1.RestartPolicyNever
	cn.createPod(t, chatty)
	cn.waitPod(t, cn.ns, "chatty", 60*time.Second, "restarted and running", func(p *v1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount == 1 &&
			p.Status.ContainerStatuses[0].State.Running != nil
	})

	logs := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, kubectlPath(), append([]string{"--kubeconfig", cn.c.AdminKubeconfig(), "-n", cn.ns, "logs"}, args...)...)
		b, err := cmd.CombinedOutput()
		out := string(b)
		if err != nil {
			t.Fatalf("kubectl logs %v: %v: %s", args, err, out)
		}
		return out
	}
	waitFor(t, 20*time.Second, "the second run's five lines", func() (bool, error) {
		return strings.Contains(logs("chatty"), "second-4"), nil
	})

	if got := logs("chatty"); got != "second-0\nsecond-1\nsecond-2\nsecond-3\nsecond-4\n" {
		t.Errorf("kubectl logs = %q", got)
	}
	if got := logs("chatty", "--previous"); got != "first-run\n" {
		t.Errorf("kubectl logs --previous = %q", got)
	}
	if got := logs("chatty", "--tail=2"); got != "second-3\nsecond-4\n" {
		t.Errorf("kubectl logs --tail=2 = %q", got)
	}
	stamped := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d) second-\d$`)
	lines := strings.Split(strings.TrimSuffix(logs("chatty", "--timestamps"), "\n"), "\n")
	if len(lines) != 5 {
		t.Errorf("kubectl logs --timestamps: %d lines: %q", len(lines), lines)
	}
	for _, l := range lines {
		if !stamped.MatchString(l) {
			t.Errorf("kubectl logs --timestamps line %q has no RFC 3339 timestamp", l)
		}
	}
	if got := logs("chatty", "--since=1h"); !strings.Contains(got, "second-0") {
		t.Errorf("kubectl logs --since=1h = %q", got)
	}
	time.Sleep(3 * time.Second) // the second run printed everything at once
	if got := logs("chatty", "--since=2s"); got != "" {
		t.Errorf("kubectl logs --since=2s = %q, want nothing: the lines are older", got)
	}

	// -f follows a running container and returns once it has exited.
	cn.createPod(t, follow)
	cn.waitPod(t, cn.ns, "follow", 60*time.Second, "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	if got := logs("follow", "-f"); got != "tick-1\ntick-2\ntick-3\ntick-4\n" {
		t.Errorf("kubectl logs -f = %q", got)
	}
}
