//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// propagationPod is a static pod whose container mounts the host
// directory dir at /shared with the given mountPropagation.
func propagationPod(name, dir, propagation string, privileged bool, script, probe string) string {
	readiness := ""
	if probe != "" {
		readiness = fmt.Sprintf(`    readinessProbe:
      exec: {command: ["sh", "-c", %q]}
      periodSeconds: 1
`, probe)
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  labels:
    %s: "true"
spec:
  terminationGracePeriodSeconds: 5
  volumes:
  - name: shared
    hostPath: {path: %s, type: DirectoryOrCreate}
  containers:
  - name: main
    image: %s
    imagePullPolicy: Never
    command: ["sh", "-c", %q]
    securityContext: {privileged: %t}
    volumeMounts:
    - {name: shared, mountPath: /shared, mountPropagation: %s}
%s`, name, testLabel, dir, busybox, script, privileged, propagation, readiness)
}

// Mount propagation as upstream, with Skiff's root directory made a
// shared mount at start: a tmpfs that a privileged container mounts under
// its Bidirectional mount of a directory of the root reaches the host and
// a HostToContainer mount of the same directory (which sees its file),
// not a mount without propagation made before it; its unmount in the
// container reaches the host too.
func TestMountPropagationBidirectionalAndHostToContainer(t *testing.T) {
	n := newPrivateNode(t)
	n.start()
	if m := mountsUnder(n.root); len(m) == 0 || m[len(m)-1] != n.root || !sharedMount(t, n.root) {
		t.Fatalf("the root directory is not a shared mount of its own: mounts %v", m)
	}
	dir := filepath.Join(n.root, "propagation")
	inner := filepath.Join(dir, "inner")
	seen := "test -f /shared/inner/marker"
	n.writeManifest("private.yaml", propagationPod("private", dir, "None", false, sleeper, ""))
	n.writeManifest("watcher.yaml", propagationPod("watcher", dir, "HostToContainer", false, sleeper, seen))
	private := n.waitRunning("private-"+nodeName, 60*time.Second)
	n.waitRunning("watcher-"+nodeName, 60*time.Second)

	n.writeManifest("maker.yaml", propagationPod("maker", dir, "Bidirectional", true,
		"mkdir -p /shared/inner && mount -t tmpfs tmpfs /shared/inner && echo made > /shared/inner/marker && "+
			"trap 'umount /shared/inner; exit 0' TERM; while true; do sleep 1 & wait $!; done", ""))
	waitFor(t, 60*time.Second, "the watcher sees the maker's tmpfs (ready)", func() (bool, error) {
		p, err := n.pod("watcher-" + nodeName)
		return err == nil && p != nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready, nil
	})
	if !isMountPoint(inner) {
		t.Errorf("the container's mount at /shared/inner did not reach the host at %s", inner)
	}
	id := strings.TrimPrefix(private.Status.ContainerStatuses[0].ContainerID, "containerd://")
	if _, _, err := n.rt.rs.ExecSync(context.Background(), id, []string{"sh", "-c", seen}, 10*time.Second); err == nil {
		t.Error("a container without mount propagation sees a mount made after it started")
	}

	n.removeManifest("maker.yaml")
	waitFor(t, 60*time.Second, "the maker's unmount reaching the host", func() (bool, error) {
		return !isMountPoint(inner), nil
	})
}

// sharedMount tells whether the topmost mount at dir is shared.
func sharedMount(t *testing.T, dir string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	must(t, err)
	shared := false
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 7 || f[4] != dir {
			continue
		}
		shared = false // a later line is stacked on an earlier one
		for _, opt := range f[6:] {
			if opt == "-" {
				break
			}
			shared = shared || strings.HasPrefix(opt, "shared:")
		}
	}
	return shared
}
