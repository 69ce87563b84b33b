//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// emptyDir shared by two containers (on disk and as a
// tmpfs), gone with the pod; hostPath types checked; subPath escapes refused.
func TestEmptyDirSharedAndRemoved(t *testing.T) {
	n := newPrivateNode(t)
	n.writeManifest("share.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: share
  labels: {skiff-e2e: "true"}
spec:
  terminationGracePeriodSeconds: 2
  volumes:
  - name: disk
    emptyDir: {}
  - name: mem
    emptyDir: {medium: Memory, sizeLimit: 16Mi}
  containers:
  - name: writer
    image: `+busybox+`
    imagePullPolicy: Never
    command: ["sh", "-c", "echo on-disk > /d/f; echo in-memory > /m/f; exec sleep 3600"]
    volumeMounts: [{name: disk, mountPath: /d}, {name: mem, mountPath: /m}]
  - name: reader
    image: `+busybox+`
    imagePullPolicy: Never
    command: ["sh", "-c", "while true; do cat /d/f /m/f 2>/dev/null; grep ' /m ' /proc/mounts; sleep 1; done"]
    volumeMounts: [{name: disk, mountPath: /d, readOnly: true}, {name: mem, mountPath: /m}]
`)
	n.start()
	p := n.waitRunning("share-"+nodeName, 30*time.Second)
	logFile := filepath.Join(podLogsRoot, "default_"+p.Name+"_"+string(p.UID), "reader", "0.log")
	waitFor(t, 15*time.Second, "reader sees both files and a tmpfs", func() (bool, error) {
		b, _ := os.ReadFile(logFile)
		s := string(b)
		return strings.Contains(s, "on-disk") && strings.Contains(s, "in-memory") && strings.Contains(s, "tmpfs /m tmpfs"), nil
	})
	podDir := filepath.Join(n.root, "pods", string(p.UID))
	if _, err := os.Stat(filepath.Join(podDir, "volumes", "kubernetes.io~empty-dir", "disk", "f")); err != nil {
		t.Errorf("emptyDir not under the pod directory: %v", err)
	}
	n.removeManifest("share.yaml")
	waitFor(t, 20*time.Second, "pod directory removed with the pod", func() (bool, error) {
		_, err := os.Stat(podDir)
		return os.IsNotExist(err), nil
	})
	if b, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(b), podDir) {
		t.Error("the tmpfs of the pod is still mounted")
	}
}

func TestHostPathTypesAndSubPathEscape(t *testing.T) {
	n := newPrivateNode(t)
	host := t.TempDir()
	n.writeManifest("missing.yaml", `apiVersion: v1
kind: Pod
metadata: {name: missing, labels: {skiff-e2e: "true"}}
spec:
  volumes: [{name: h, hostPath: {path: `+host+`/nope, type: Directory}}]
  containers:
  - {name: main, image: `+busybox+`, imagePullPolicy: Never, command: ["sleep", "3600"], volumeMounts: [{name: h, mountPath: /h}]}
`)
	n.writeManifest("create.yaml", `apiVersion: v1
kind: Pod
metadata: {name: create, labels: {skiff-e2e: "true"}}
spec:
  terminationGracePeriodSeconds: 2
  volumes: [{name: h, hostPath: {path: `+host+`/made.txt, type: FileOrCreate}}]
  containers:
  - {name: main, image: `+busybox+`, imagePullPolicy: Never, command: ["sh", "-c", "echo written > /h; exec sleep 3600"], volumeMounts: [{name: h, mountPath: /h}]}
`)
	// An init container plants a symlink to /etc; the app container's
	// subPath through it must be refused, and nothing outside read.
	n.writeManifest("escape.yaml", `apiVersion: v1
kind: Pod
metadata: {name: escape, labels: {skiff-e2e: "true"}}
spec:
  volumes: [{name: v, emptyDir: {}}]
  initContainers:
  - {name: plant, image: `+busybox+`, imagePullPolicy: Never, command: ["ln", "-s", "/etc", "/v/esc"], volumeMounts: [{name: v, mountPath: /v}]}
  containers:
  - {name: main, image: `+busybox+`, imagePullPolicy: Never, command: ["cat", "/x/shadow"], volumeMounts: [{name: v, mountPath: /x, subPath: esc}]}
`)
	n.start()
	n.waitRunning("create-"+nodeName, 30*time.Second)
	waitFor(t, 10*time.Second, "FileOrCreate file written through", func() (bool, error) {
		b, err := os.ReadFile(filepath.Join(host, "made.txt"))
		return err == nil && string(b) == "written\n", nil
	})
	waitFor(t, 20*time.Second, "missing Directory refused, subPath escape refused", func() (bool, error) {
		missing, err := n.pod("missing-" + nodeName)
		if err != nil || missing == nil {
			return false, err
		}
		escape, err := n.pod("escape-" + nodeName)
		if err != nil || escape == nil || len(escape.Status.ContainerStatuses) != 1 {
			return false, err
		}
		w := escape.Status.ContainerStatuses[0].State.Waiting
		return missing.Status.Phase == "Pending" && w != nil && w.Reason == "CreateContainerConfigError" &&
			strings.Contains(w.Message, "outside the volume"), nil
	})
	// The escape pod got as far as its container config; the pod whose
	// hostPath Directory is missing never got past its volumes.
	uid := string(mustPod(t, n, "missing-"+nodeName).UID)
	if sb, cs := n.sandboxesOf(uid), n.containersOf(uid); len(sb) != 0 || len(cs) != 0 {
		t.Errorf("a pod whose volume failed got %d sandboxes and %d containers", len(sb), len(cs))
	}
}

func mustPod(t *testing.T, n *node, name string) *v1.Pod {
	t.Helper()
	p, err := n.pod(name)
	if err != nil || p == nil {
		t.Fatalf("pod %s: %v", name, err)
	}
	return p
}
