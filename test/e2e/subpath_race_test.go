//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	swapCheckers = 16 // subPath containers per pod, each with its own back-off
	swapStarts   = 50 // container starts the attack must get at least
	// Exit codes of a checker: it saw the host's marker file, or its mount
	// was not a directory.
	exitSawHost = 42
	exitNotDir  = 43
)

// swapPod renders a pod whose "swap" container turns shared/x into a
// symlink to / and back into a directory as fast as a shell loop goes,
// while swapCheckers containers mount shared with subPath x, look for a
// marker file that exists only on the host, and exit at once, so that
// they start over and over. The swap renames one directory in and out
// (mv -T, no merging into an existing directory) rather than making and
// removing one: the kernel refuses to mount a removed directory, so with
// rmdir nearly every start would fail in the runtime and the test would
// not see starts that mount the directory.
func swapPod(name, marker string) string {
	check := fmt.Sprintf("if [ -e /mnt%s ]; then exit %d; fi; [ -d /mnt ] || exit %d; exit 0", marker, exitSawHost, exitNotDir)
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: v1
kind: Pod
metadata: {name: %s, labels: {%s: "true"}}
spec:
  terminationGracePeriodSeconds: 1
  volumes: [{name: shared, emptyDir: {}}]
  containers:
  - {name: swap, image: %s, imagePullPolicy: Never, volumeMounts: [{name: shared, mountPath: /shared}],
     command: ["sh", "-c", "cd /shared; mkdir d; ln -s / l; while true; do mv -T d x; mv -T x d; mv -T l x; mv -T x l; done 2>/dev/null"]}
`, name, testLabel, busybox)
	for i := range swapCheckers {
		fmt.Fprintf(&b, `  - {name: check%d, image: %s, imagePullPolicy: Never, volumeMounts: [{name: shared, mountPath: /mnt, subPath: x}],
     command: ["sh", "-c", %q]}
`, i, busybox, check)
	}
	return b.String()
}

// swapTally is what the runtime and the API showed of the checkers.
type swapTally struct {
	exits    map[string]*runtimeapi.ContainerStatus // exited checker containers by ID
	seen     map[string]bool                        // every checker container ID the runtime listed
	reasons  map[string]int                         // waiting and terminated reasons in the API
	messages map[string]bool                        // the API's messages of runtime start failures
}

// observe records the pod's checker containers from the runtime and its
// container states from the read-only API, and fails the test if the
// swapping container stopped running.
func (s *swapTally) observe(t *testing.T, n *node, name, uid string) {
	t.Helper()
	for _, c := range n.containersOf(uid) {
		if !strings.HasPrefix(c.Metadata.Name, "check") {
			continue
		}
		s.seen[c.Id] = true
		if _, done := s.exits[c.Id]; done || c.State != runtimeapi.ContainerState_CONTAINER_EXITED {
			continue
		}
		st, err := n.runtime().ContainerStatus(context.Background(), c.Id, false)
		if err != nil || st.Status == nil {
			continue // removed meanwhile
		}
		s.exits[c.Id] = st.Status
	}
	p, err := n.pod(name)
	if err != nil || p == nil {
		return
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == "swap" {
			if cs.RestartCount != 0 || (cs.State.Running == nil && cs.State.Waiting == nil) {
				t.Fatalf("the swapping container stopped: %+v", cs.State)
			}
			continue
		}
		reason, msg := "Running", ""
		if w := cs.State.Waiting; w != nil {
			reason, msg = w.Reason, w.Message
		}
		if term := cs.State.Terminated; term != nil {
			reason, msg = term.Reason, term.Message
		}
		s.reasons[reason]++
		if reason == "RunContainerError" || reason == "StartError" {
			s.messages[msg] = true
		}
	}
}

// ran counts the checker containers that ran their check: the others
// never got past the runtime's start.
func (s *swapTally) ran() int {
	n := 0
	for _, st := range s.exits {
		if st.Reason != "StartError" {
			n++
		}
	}
	return n
}

// TestSubPathSwapAttack runs CVE-2021-25741's attack: a container swaps a
// directory of a shared emptyDir with a symlink to / while another
// container of the pod mounts that directory by subPath and restarts over
// and over. Each start must mount a directory of the volume (the checker
// exits 0) or be refused: by Skiff with CreateContainerConfigError, or by
// the kernel when the directory checked was removed before the runtime
// mounted it. None may show the host. Pods are replaced by new ones (a new UID: no crash back-off)
// until enough starts happened. Last, Skiff is stopped, the pod's
// manifest removed, and the restarted Skiff must leave no subPath mount.
func TestSubPathSwapAttack(t *testing.T) {
	var n *node
	// Registered first, so it runs last: after Skiff stopped and the pods
	// went, a failed run must not leave subPath mounts behind.
	t.Cleanup(func() { unmountUnder(t, n.root) })
	n = newPrivateNode(t)
	f, err := os.CreateTemp("/var/tmp", "skiff-e2e-host-marker-")
	must(t, err)
	f.Close()
	t.Cleanup(func() { os.Remove(f.Name()) })
	marker := f.Name()
	n.start()
	tally := &swapTally{exits: map[string]*runtimeapi.ContainerStatus{}, seen: map[string]bool{}, reasons: map[string]int{}, messages: map[string]bool{}}
	deadline := time.Now().Add(12 * time.Minute)
	var name, uid, file string
	for round := 1; tally.ran() < swapStarts; round++ {
		if time.Now().After(deadline) {
			t.Fatalf("only %d checker starts ran in 12 minutes (API reasons %v)", tally.ran(), tally.reasons)
		}
		if file != "" {
			n.removeManifest(file) // its containers are all listed and exited by now
		}
		file = fmt.Sprintf("swap%d.yaml", round)
		n.writeManifest(file, swapPod(fmt.Sprintf("swap%d", round), marker))
		name = fmt.Sprintf("swap%d-%s", round, nodeName)
		uid = string(n.waitRunningSwapper(t, name).UID)
		// Starts come at once, 10 s later, then 20 s after that: a
		// minute gives each checker its first three tries.
		roundEnd := time.Now().Add(75 * time.Second)
		for time.Now().Before(roundEnd) && tally.ran() < swapStarts {
			tally.observe(t, n, name, uid)
			time.Sleep(300 * time.Millisecond)
		}
		// Let the last starts exit before the pod goes.
		waitFor(t, 30*time.Second, "the checkers listed to exit", func() (bool, error) {
			tally.observe(t, n, name, uid)
			return len(tally.exits) == len(tally.seen), nil
		})
		t.Logf("round %d: %d checker starts so far, API reasons %v", round, tally.ran(), tally.reasons)
	}
	refused := 0
	for id, st := range tally.exits {
		switch {
		case st.Reason == "StartError" && strings.Contains(st.Message, "no such file or directory"):
			refused++ // the checked directory was renamed over before the runtime mounted it
		case st.ExitCode == 0:
		case st.ExitCode == exitSawHost:
			t.Errorf("checker container %s saw the host's file %s through its subPath mount", id, marker)
		case st.ExitCode == exitNotDir:
			t.Errorf("checker container %s got a subPath mount that is not a directory", id)
		default:
			t.Errorf("checker container %s exited %d (%s: %s)", id, st.ExitCode, st.Reason, st.Message)
		}
	}
	for reason := range tally.reasons {
		switch reason {
		case "Running", "CreateContainerConfigError", "CrashLoopBackOff", "ContainerCreating", "Completed", "RunContainerError", "StartError":
		default:
			t.Errorf("a checker was in state %q; a start must mount the directory or be refused", reason)
		}
	}
	// A directory Skiff made for a missing x is replaced by the swap's
	// rename before the runtime mounts it now and then: the kernel then
	// refuses the mount of the removed directory. Any other runtime
	// failure is an error.
	for msg := range tally.messages {
		if !strings.Contains(msg, "no such file or directory") {
			t.Errorf("a checker failed in the runtime: %s", msg)
		}
	}
	t.Logf("%d checker containers ran and saw a directory of the volume, %d were refused by the runtime (their directory removed), API reasons %v",
		tally.ran(), refused, tally.reasons)
	if tally.reasons["CreateContainerConfigError"] == 0 {
		t.Error("no start was refused: the swap never showed a symlink, so the attack was not tried")
	}

	// Leftovers after a restart: the pod's manifest goes while Skiff is
	// down; back up, Skiff tears the orphan down, subPath mounts included.
	podDir := filepath.Join(n.root, "pods", uid)
	if mounts, _ := os.ReadFile("/proc/self/mountinfo"); !strings.Contains(string(mounts), filepath.Join(podDir, "volume-subpaths")) {
		t.Fatalf("the running pod has no subPath mount under %s", podDir)
	}
	n.stop()
	n.removeManifest(file)
	n.start()
	waitFor(t, 90*time.Second, "the orphan's subPath mounts and directory gone", func() (bool, error) {
		mounts, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			return false, err
		}
		_, statErr := os.Stat(podDir)
		return !strings.Contains(string(mounts), podDir) && os.IsNotExist(statErr), nil
	})
}

// unmountUnder lazily unmounts whatever is mounted under dir.
func unmountUnder(t *testing.T, dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Error(err)
		return
	}
	lines := strings.Split(string(b), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		fields := strings.Fields(lines[i])
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			if err := syscall.Unmount(fields[4], syscall.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", fields[4], err)
			}
		}
	}
}

// waitRunningSwapper waits until the pod's swapping container runs.
func (n *node) waitRunningSwapper(t *testing.T, name string) *v1.Pod {
	t.Helper()
	var got *v1.Pod
	waitFor(t, 60*time.Second, "pod "+name+" swapping", func() (bool, error) {
		p, err := n.pod(name)
		if err != nil || p == nil {
			return false, nil
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == "swap" && cs.State.Running != nil {
				got = p
				return true, nil
			}
		}
		return false, nil
	})
	return got
}
