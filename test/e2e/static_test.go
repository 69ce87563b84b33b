//go:build e2e

package e2e

import (
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const podLogsRoot = "/var/log/pods"

// A static pod that prints runs; its log has the line; /pods
// shows it Running with container IDs and a pod IP from the CNI bridge.
func TestStaticPodRunsAndLogs(t *testing.T) {
	n := newPrivateNode(t)
	n.writeManifest("hello.yaml", staticPod("hello", "echo hello-from-skiff; exec sleep 3600", ""))
	n.start()
	p := n.waitRunning("hello-"+nodeName, 30*time.Second)

	if p.Spec.NodeName != nodeName || p.Annotations["kubernetes.io/config.source"] != "file" {
		t.Errorf("static pod metadata: nodeName=%q annotations=%v", p.Spec.NodeName, p.Annotations)
	}
	if _, bridge, err := net.ParseCIDR(n.podSubnet()); err != nil || !bridge.Contains(net.ParseIP(p.Status.PodIP)) {
		t.Errorf("pod IP %q is not from the CNI bridge range %s", p.Status.PodIP, n.podSubnet())
	}
	cs := p.Status.ContainerStatuses[0]
	if !strings.HasPrefix(cs.ContainerID, "containerd://") || cs.RestartCount != 0 || !cs.Ready {
		t.Errorf("container status: %+v", cs)
	}
	if p.Status.QOSClass != v1.PodQOSBestEffort || p.Status.StartTime == nil {
		t.Errorf("qosClass=%q startTime=%v", p.Status.QOSClass, p.Status.StartTime)
	}
	for _, c := range p.Status.Conditions {
		if c.Status != v1.ConditionTrue {
			t.Errorf("condition %s is %s (%s)", c.Type, c.Status, c.Message)
		}
	}
	// The CRI log file: /var/log/pods/<ns>_<name>_<uid>/<container>/0.log
	logFile := filepath.Join(podLogsRoot, "default_"+p.Name+"_"+string(p.UID), "main", "0.log")
	waitFor(t, 10*time.Second, "log line in "+logFile, func() (bool, error) {
		b, err := os.ReadFile(logFile)
		return err == nil && strings.Contains(string(b), " stdout F hello-from-skiff"), nil
	})
}

// A killed container is restarted and restartCount goes up.
func TestKilledContainerIsRestarted(t *testing.T) {
	n := newPrivateNode(t)
	n.writeManifest("victim.yaml", staticPod("victim", "exec sleep 3600", ""))
	n.start()
	p := n.waitRunning("victim-"+nodeName, 30*time.Second)
	oldID := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")

	n.killContainerProcess(oldID)
	waitFor(t, 30*time.Second, "restart after kill", func() (bool, error) {
		p, err := n.pod("victim-" + nodeName)
		if err != nil || p == nil {
			return false, err
		}
		cs := p.Status.ContainerStatuses[0]
		if cs.RestartCount != 1 || cs.State.Running == nil {
			return false, nil
		}
		if cs.ContainerID == "containerd://"+oldID {
			t.Fatalf("restartCount went up but the container ID did not change")
		}
		if lt := cs.LastTerminationState.Terminated; lt == nil || lt.ExitCode != 137 {
			t.Fatalf("lastState should be the killed container (exit 137): %+v", cs.LastTerminationState)
		}
		return true, nil
	})
}

// A container that keeps failing backs off 10 s, 20 s, ...
func TestCrashLoopBacksOff(t *testing.T) {
	n := newPrivateNode(t)
	n.writeManifest("crash.yaml", staticPod("crash", "echo dying; exit 1", ""))
	n.start()

	// Record when each attempt was created, straight from containerd.
	created := map[uint32]time.Time{}
	var uid string
	sawBackOff := false
	waitFor(t, 90*time.Second, "four attempts of a crashing container", func() (bool, error) {
		if uid == "" {
			p, err := n.pod("crash-" + nodeName)
			if err != nil || p == nil {
				return false, err
			}
			uid = string(p.UID)
		}
		for _, c := range n.containersOf(uid) {
			if _, ok := created[c.Metadata.Attempt]; !ok {
				created[c.Metadata.Attempt] = time.Unix(0, c.CreatedAt)
			}
		}
		if p, _ := n.pod("crash-" + nodeName); p != nil && len(p.Status.ContainerStatuses) == 1 {
			if w := p.Status.ContainerStatuses[0].State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
				sawBackOff = true
			}
		}
		return len(created) >= 4, nil
	})
	var attempts []uint32
	for a := range created {
		attempts = append(attempts, a)
	}
	sort.Slice(attempts, func(i, j int) bool { return attempts[i] < attempts[j] })
	if attempts[0] != 0 || attempts[3] != 3 {
		t.Fatalf("attempts seen: %v (a restart was missed)", attempts)
	}
	gap := func(i int) time.Duration { return created[uint32(i+1)].Sub(created[uint32(i)]) }
	t.Logf("gaps between attempts: %v, %v, %v", gap(0), gap(1), gap(2))
	// First restart is immediate; then 10 s, then 20 s (upstream's back-off).
	if gap(0) > 5*time.Second {
		t.Errorf("first restart took %v, want immediate", gap(0))
	}
	if gap(1) < 9*time.Second || gap(1) > 16*time.Second {
		t.Errorf("second restart after %v, want about 10s", gap(1))
	}
	if gap(2) < 19*time.Second || gap(2) > 27*time.Second {
		t.Errorf("third restart after %v, want about 20s", gap(2))
	}
	if !sawBackOff {
		t.Errorf("/pods never showed the CrashLoopBackOff waiting reason")
	}
}

// Editing a manifest replaces the pod; deleting the file
// removes sandbox and containers within the grace period.
func TestManifestEditReplacesAndDeleteRemoves(t *testing.T) {
	n := newPrivateNode(t)
	name := "editme-" + nodeName
	// Trap TERM so the pod stops promptly, as a well-behaved workload does.
	script := func(word string) string {
		return "trap 'exit 0' TERM; echo " + word + "; while true; do sleep 1; done"
	}
	n.writeManifest("edit.yaml", staticPod("editme", script("first"), ""))
	n.start()
	first := n.waitRunning(name, 30*time.Second)

	n.writeManifest("edit.yaml", staticPod("editme", script("second"), ""))
	var second *v1.Pod
	waitFor(t, 30*time.Second, "replaced pod running", func() (bool, error) {
		p, err := n.pod(name)
		if err != nil || p == nil || p.UID == first.UID || p.Status.Phase != v1.PodRunning {
			return false, err
		}
		second = p
		return true, nil
	})
	if cmd := second.Spec.Containers[0].Command[2]; !strings.Contains(cmd, "second") {
		t.Errorf("replaced pod runs %q", cmd)
	}
	waitFor(t, 15*time.Second, "old pod's containers removed", func() (bool, error) {
		return len(n.containersOf(string(first.UID))) == 0, nil
	})

	removed := time.Now()
	n.removeManifest("edit.yaml")
	// Grace period is 5 s; allow for the relist and removal on top.
	waitFor(t, 12*time.Second, "pod's containers removed after manifest deletion", func() (bool, error) {
		return len(n.containersOf(string(second.UID))) == 0, nil
	})
	t.Logf("pod's containers gone %v after its manifest was deleted", time.Since(removed).Round(time.Millisecond))
	// Stopped sandboxes are removed a minute after their pod is cleaned up
	// (sandboxRemovalDelay), as upstream's container GC does.
	waitFor(t, 90*time.Second, "both pods' sandboxes removed", func() (bool, error) {
		return len(n.sandboxesOf(string(first.UID))) == 0 && len(n.sandboxesOf(string(second.UID))) == 0, nil
	})
	if p, err := n.pod(name); err != nil || p != nil {
		t.Errorf("/pods still lists the deleted pod (err=%v)", err)
	}
	if _, err := os.Stat(filepath.Join(podLogsRoot, "default_"+name+"_"+string(second.UID))); !os.IsNotExist(err) {
		t.Errorf("pod log directory left behind: %v", err)
	}
}

// A malformed manifest next to a good one: the good pod runs,
// the bad files are reported by name.
func TestBadManifestsAreReportedAndSkipped(t *testing.T) {
	n := newPrivateNode(t)
	n.writeManifest("good.yaml", staticPod("good", "exec sleep 3600", ""))
	n.writeManifest("broken.yaml", "apiVersion: v1\nkind: Pod\nmetadata: [this is not\n")
	n.writeManifest("typo.yaml", strings.Replace(staticPod("typo", "sleep 1", ""), "containers:", "containerz:", 1))
	n.writeManifest("list.yaml", "apiVersion: v1\nkind: PodList\nitems: []\n")
	n.start()
	n.waitRunning("good-"+nodeName, 30*time.Second)
	waitFor(t, 10*time.Second, "errors for each bad file in the log", func() (bool, error) {
		log := n.log()
		return strings.Contains(log, "broken.yaml") && strings.Contains(log, "typo.yaml") &&
			strings.Contains(log, "containerz") && strings.Contains(log, "list.yaml"), nil
	})
	pods, err := n.pods()
	must(t, err)
	if len(pods) != 1 {
		t.Errorf("want only the good pod, /pods has %d", len(pods))
	}
}

// Stopping and restarting Skiff with two pods running restarts
// no container.
func TestRestartAdoptsRunningPods(t *testing.T) {
	n := newPrivateNode(t)
	n.writeManifest("a.yaml", staticPod("adopt-a", "exec sleep 3600", ""))
	n.writeManifest("b.yaml", staticPod("adopt-b", "exec sleep 3600", ""))
	n.start()
	before := map[string]string{}
	for _, name := range []string{"adopt-a-" + nodeName, "adopt-b-" + nodeName} {
		before[name] = n.waitRunning(name, 30*time.Second).Status.ContainerStatuses[0].ContainerID
	}
	n.stop()
	// With Skiff down the containers keep running.
	for name, id := range before {
		resp, err := n.runtime().ContainerStatus(t.Context(), strings.TrimPrefix(id, "containerd://"), false)
		must(t, err)
		if resp.Status.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Fatalf("%s stopped while Skiff was down: %v", name, resp.Status.State)
		}
	}
	n.start()
	for name, id := range before {
		p := n.waitRunning(name, 30*time.Second)
		cs := p.Status.ContainerStatuses[0]
		if cs.ContainerID != id || cs.RestartCount != 0 {
			t.Errorf("%s: container %s restartCount %d after Skiff restart, want %s and 0", name, cs.ContainerID, cs.RestartCount, id)
		}
	}
	// And nothing restarts later either (a few relists and syncs).
	time.Sleep(5 * time.Second)
	for name, id := range before {
		p, err := n.pod(name)
		must(t, err)
		if cs := p.Status.ContainerStatuses[0]; cs.ContainerID != id || cs.RestartCount != 0 {
			t.Errorf("%s restarted after adoption: %+v", name, cs)
		}
		if n := len(n.containersOf(string(p.UID))); n != 1 {
			t.Errorf("%s has %d containers, want 1", name, n)
		}
	}
}
