//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/test/cluster"
	"github.com/skiff-sh/skiff/test/ports"
)

// The shared node: one Skiff joined to the suite's control plane, started
// by the first parallel test and stopped when the package's tests are
// done. Every parallel test runs its pods there in a namespace of its own.
var (
	sharedOnce    sync.Once
	sharedStarted atomic.Bool
	theShared     *node // its t is nil: tests get copies with their own
	sharedErr     error
)

// sharedNode marks the test parallel and returns a view of the shared
// node, with a fresh namespace whose pods are deleted (and their volumes
// removed) when the test ends. The test may create pods, read the node's
// APIs and the runtime, but not start, stop or reconfigure Skiff, and not
// assert node-wide figures other tests move.
func sharedNode(t *testing.T) *clusterNode {
	t.Helper()
	checkGroup(t, true)
	t.Parallel()
	c := getCluster(t)
	sharedOnce.Do(func() {
		sharedStarted.Store(true)
		theShared, sharedErr = startShared(c)
	})
	if sharedErr != nil {
		t.Fatalf("starting the shared node: %v", sharedErr)
	}
	n := *theShared
	n.t, n.shared = t, true
	cn := &clusterNode{node: &n, c: c, admin: c.Client()}
	cn.ns = c.NewNamespace(context.Background(), t)
	n.ns = cn.ns
	t.Cleanup(func() {
		cn.deleteAllPods()
		if t.Failed() {
			t.Logf("the shared Skiff's log about %s:\n%s", cn.ns, grepLines(n.log(), cn.ns, 150))
		}
	})
	return cn
}

// startShared starts the shared node and waits until its Node is Ready
// with this Skiff's status (the Node object may be an earlier test's).
func startShared(c *cluster.Cluster) (*node, error) {
	dir, err := os.MkdirTemp("", "skiff-e2e-shared")
	if err != nil {
		return nil, err
	}
	n := &node{
		root:      filepath.Join(dir, "root"),
		manifests: filepath.Join(dir, "manifests"),
		config:    filepath.Join(dir, "config.yaml"),
		logPath:   filepath.Join(dir, "skiff.log"),
	}
	for _, p := range []*int{&n.port, &n.apiPort, &n.healthzPort} {
		if *p, err = ports.Free(); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(n.manifests, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(n.config, []byte(n.kubeletConfig(e2eCgroupRoot, clusterAuth(c))), 0o644); err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "node.kubeconfig")
	if err := c.NodeKubeconfig(nodeName, kubeconfig); err != nil {
		return nil, err
	}
	n.args = []string{"--kubeconfig", kubeconfig}
	if err := n.launch(); err != nil {
		return nil, err
	}
	if err := n.waitHealthy(30 * time.Second); err != nil {
		return n, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for {
		node, err := c.Client().CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err == nil && int(node.Status.DaemonEndpoints.KubeletEndpoint.Port) == n.apiPort {
			if s, _ := nodeReady(node); s == "True" {
				return n, nil
			}
		}
		select {
		case <-ctx.Done():
			return n, fmt.Errorf("the shared node did not turn Ready with its own status: %w\n%s", ctx.Err(), tail(n.log(), 30))
		case <-n.exited:
			return n, fmt.Errorf("the shared skiff exited: %s", tail(n.log(), 30))
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// stopShared stops the shared node, if it ran, and removes its pods.
func stopShared() {
	n := theShared
	if n == nil || n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(30 * time.Second):
		_ = n.cmd.Process.Kill()
		<-n.exited
		fmt.Fprintln(os.Stderr, "the shared skiff did not stop within 30s of SIGTERM")
	}
	removeTestPods()
	if left := unmountRoot(n.root); len(left) > 0 {
		fmt.Fprintln(os.Stderr, "mounts left under the shared node's root directory:", left)
	}
	os.RemoveAll(filepath.Dir(n.root))
}
