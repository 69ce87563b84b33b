//go:build e2e

package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

// A pod mounts a read-only hostPath file at its terminationMessagePath,
// and its emptyDir takes every inode of the filesystem Skiff's root
// directory is on (a 4096-inode tmpfs of the test's own), so Skiff cannot
// make the container's termination message file. The container then
// fails over and over and container GC prunes its old instances. The host
// file is still there with its content, and no status of the pod ever
// holds that content.
//
// Hard eviction is off: its node-level reclaim would race container GC
// for the same dead instances, and GC's prune is the path under test (a
// static pod is never evicted anyway).
func TestTerminationPathHostFileSurvivesFullDisk(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	must(t, os.MkdirAll(root, 0o755))
	must(t, unix.Mount("tmpfs", root, "tmpfs", 0, "size=64m,nr_inodes=4096,mode=0755"))
	t.Cleanup(func() {
		// EINVAL: the node's cleanup unmounted it already, with the bind
		// mount Skiff stacks on its root directory to make it shared.
		if err := unix.Unmount(root, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			t.Errorf("unmount %s: %v", root, err)
		}
	})
	const content = "host file content, readable by the pod, never its to delete or publish\n"
	hostFile := filepath.Join(dir, "host-file")
	must(t, os.WriteFile(hostFile, []byte(content), 0o644))

	n := newNode(t) // its cleanup (stop Skiff, remove pods) runs before the unmount
	n.root = root
	n.appendConfig("evictionHard: {}\n")
	n.start()
	n.writeManifest("termhost.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: termhost
  labels:
    %s: "true"
spec:
  terminationGracePeriodSeconds: 1
  initContainers:
  - name: fill
    image: %s
    imagePullPolicy: Never
    command: ["sh", "-c", "i=0; while true 2>/dev/null >/fill/f$i; do i=$((i+1)); done; echo made $i files"]
    volumeMounts:
    - {name: fill, mountPath: /fill}
  containers:
  - name: main
    image: %s
    imagePullPolicy: Never
    command: ["sh", "-c", "cat /dev/termination-log; exit 1"]
    volumeMounts:
    - {name: host, mountPath: /dev/termination-log, readOnly: true}
  volumes:
  - name: fill
    emptyDir: {}
  - name: host
    hostPath: {path: %s, type: File}
`, testLabel, busybox, busybox, hostFile))

	// Every status seen on the way is checked, not just the last (a
	// static pod's name ends in its node's).
	checkStatus := func(p *v1.Pod) {
		t.Helper()
		b, err := json.Marshal(p.Status)
		must(t, err)
		if strings.Contains(string(b), strings.TrimSpace(content)) {
			t.Fatalf("the pod's status holds the host file's content: %s", b)
		}
	}
	var uid string
	waitFor(t, 240*time.Second, "main restarted 3 times", func() (bool, error) {
		p, err := n.pod("termhost-" + nodeName)
		if err != nil || p == nil {
			return false, err
		}
		checkStatus(p)
		uid = string(p.UID)
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == "main" && cs.RestartCount >= 3 {
				return true, nil
			}
		}
		return false, nil
	})

	// The disk was full when main was made: the emptyDir took every
	// inode, and Skiff could make no termination file for main.
	var st unix.Statfs_t
	must(t, unix.Statfs(root, &st))
	fill, err := os.ReadDir(filepath.Join(root, "pods", uid, "volumes", "kubernetes.io~empty-dir", "fill"))
	must(t, err)
	t.Logf("the emptyDir holds %d files; %d of %d inodes free", len(fill), st.Ffree, st.Files)
	if st.Ffree != 0 || len(fill) < 3000 {
		t.Fatalf("the inodes were not exhausted: %d files in the emptyDir, %d inodes free", len(fill), st.Ffree)
	}
	if _, err := os.Stat(filepath.Join(root, "pods", uid, "containers", "main")); !os.IsNotExist(err) {
		t.Fatalf("main has termination files (%v): the disk was not full when it was made", err)
	}
	// Container GC ran: four instances of main were made, fewer are kept.
	mains := 0
	for _, c := range containersOf(t, uid) {
		if c.GetMetadata().GetName() == "main" {
			mains++
		}
	}
	if mains >= 4 {
		t.Fatalf("%d instances of main kept: container GC pruned none", mains)
	}

	b, err := os.ReadFile(hostFile)
	if err != nil || string(b) != content {
		t.Fatalf("the read-only host file: %q, %v; want it untouched", b, err)
	}
	p, err := n.pod("termhost-" + nodeName)
	must(t, err)
	checkStatus(p)
}
