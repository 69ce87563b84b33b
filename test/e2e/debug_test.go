//go:build e2e

package e2e

import (
	"io"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Ephemeral containers, as kubectl debug adds them to a running
// pod: started once in the target container's PID namespace, reported in
// ephemeralContainerStatuses, their logs readable and stdin attachable.
func TestKubectlDebug(t *testing.T) {
	cn := sharedNode(t)
	cn.createPod(t, busyboxPod("target", "exec sleep 31337"))
	cn.waitPod(t, cn.ns, "target", 60*time.Second, "Ready", isReady)

	ephemeral := func(p *v1.Pod, name string) *v1.ContainerStatus {
		for i := range p.Status.EphemeralContainerStatuses {
			if p.Status.EphemeralContainerStatuses[i].Name == name {
				return &p.Status.EphemeralContainerStatuses[i]
			}
		}
		return nil
	}

	t.Run("target's PID namespace, logs", func(t *testing.T) {
		out, err := kubectl(cn.c, "-n", cn.ns, "debug", "target", "--image="+busybox, "--image-pull-policy=Never",
			"-c", "dbg", "--target=main", "--", "sh", "-c", "ps -o pid,args; echo debug-done").CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl debug: %v: %s", err, out)
		}
		p := cn.waitPod(t, cn.ns, "target", 60*time.Second, "dbg terminated", func(p *v1.Pod) bool {
			cs := ephemeral(p, "dbg")
			return cs != nil && cs.State.Terminated != nil
		})
		if term := ephemeral(p, "dbg").State.Terminated; term.ExitCode != 0 || !strings.HasPrefix(term.ContainerID, "containerd://") {
			t.Errorf("dbg terminated %+v", term)
		}
		logs, err := kubectl(cn.c, "-n", cn.ns, "logs", "target", "-c", "dbg").CombinedOutput()
		if err != nil || !strings.Contains(string(logs), "sleep 31337") || !strings.Contains(string(logs), "debug-done") {
			t.Errorf("kubectl logs -c dbg (want the target's sleep 31337 in ps): %v\n%s", err, logs)
		}
		// Never restarted; the pod goes on as it was.
		time.Sleep(3 * time.Second)
		p = cn.getPod(t, "target")
		if cs := ephemeral(p, "dbg"); cs.RestartCount != 0 || cs.State.Terminated == nil {
			t.Errorf("dbg after exit: %+v", cs)
		}
		if !isReady(p) || mainStatus(p).RestartCount != 0 {
			t.Errorf("target after debugging: ready %v, restarts %d", isReady(p), mainStatus(p).RestartCount)
		}
	})

	t.Run("attached stdin", func(t *testing.T) {
		// Closing stdin ends the attach session: it stays open until the
		// answer has come.
		line, stdin := converse(t, cn.c, "echo via-$((6*7))", "via-",
			"-n", cn.ns, "debug", "-i", "target", "--image="+busybox, "--image-pull-policy=Never", "-c", "dbg-i", "--", "sh")
		if line != "via-42" {
			t.Errorf("kubectl debug -i answered %q", line)
		}
		_, _ = io.WriteString(stdin, "exit 0\n")
		_ = stdin.Close()
		cn.waitPod(t, cn.ns, "target", 60*time.Second, "dbg-i terminated", func(p *v1.Pod) bool {
			cs := ephemeral(p, "dbg-i")
			return cs != nil && cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0
		})
	})
}
