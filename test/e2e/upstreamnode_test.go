//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/test/cluster"
	"github.com/skiff-sh/skiff/test/kubeletconfig"
)

// upstreamKubeletBin is the upstream kubelet built by hack/build-tools.sh.
const upstreamKubeletBin = "../../_output/bin/kubelet"

// upstreamTaint keeps other tests' workloads off upstream nodes; tests
// bind their pods to them by name.
const upstreamTaint = "skiff.e2e/upstream"

// upstreamMu lets one upstream kubelet run at a time: whatever its root
// directory, it owns /var/lib/kubelet/device-plugins and empties it at
// start, so two would break each other's device plugins.
var upstreamMu sync.Mutex

// newUpstreamClusterNode marks the test parallel and returns an upstream
// kubelet v1.34 as a node of the suite cluster, Ready, on a private
// containerd, with a namespace of its own: the reference a test runs the
// same steps against to show Skiff behaves as upstream's. extraConfig is
// appended to its KubeletConfiguration.
func newUpstreamClusterNode(t *testing.T, extraConfig string) *clusterNode {
	t.Helper()
	checkGroup(t, false)
	t.Parallel()
	return startUpstreamNode(t, getCluster(t), extraConfig)
}

// startUpstreamNode is newUpstreamClusterNode for a test already
// parallel (one that also uses the shared node).
func startUpstreamNode(t *testing.T, c *cluster.Cluster, extraConfig string) *clusterNode {
	t.Helper()
	return startUpstreamNodeOn(t, c, newPrivateRuntime(t), extraConfig)
}

// startUpstreamNodeOn is startUpstreamNode on a private runtime the test
// has set up itself.
func startUpstreamNodeOn(t *testing.T, c *cluster.Cluster, rt *privateRuntime, extraConfig string) *clusterNode {
	t.Helper()
	if _, err := os.Stat(upstreamKubeletBin); err != nil {
		t.Fatalf("the upstream kubelet (hack/build-tools.sh kubelet): %v", err)
	}
	upstreamMu.Lock()
	t.Cleanup(upstreamMu.Unlock) // after the kubelet stopped: cleanups run in reverse
	dir := filepath.Join(rt.dir, "upstream-kubelet")
	must(t, os.MkdirAll(dir, 0o755))
	n := &node{
		t: t, rt: rt, endpoint: rt.endpoint, upstream: true,
		name:    fmt.Sprintf("e2e-upstream-%d", rt.id),
		root:    filepath.Join(dir, "root"),
		config:  filepath.Join(dir, "config.yaml"),
		logPath: filepath.Join(dir, "kubelet.log"),
		apiPort: freePort(t), healthzPort: freePort(t),
	}
	cn := &clusterNode{node: n, c: c, admin: c.Client()}
	cn.ns = c.NewNamespace(context.Background(), t)
	cn.proxy = startProxy(t, strings.TrimPrefix(c.APIServerURL(), "https://"))
	kubeconfig := filepath.Join(dir, "kubeconfig")
	must(t, c.NodeKubeconfig(n.name, kubeconfig))
	b, err := os.ReadFile(kubeconfig)
	must(t, err)
	// The apiserver certificate is valid for 127.0.0.1, where the proxy is.
	must(t, os.WriteFile(kubeconfig, []byte(strings.ReplaceAll(string(b), c.APIServerURL(), "https://"+cn.proxy.addr)), 0o600))
	n.args = []string{"--kubeconfig", kubeconfig}
	must(t, os.WriteFile(n.config, []byte(upstreamConfig(n, c.CAFile())+extraConfig), 0o644))
	// Unlike Skiff, the upstream kubelet wants its cgroupRoot to exist
	// (rt's cleanup removes it).
	makeCgroupRoot(t, rt.cgroupRoot)
	keepFixedKubeletDir(t)

	n.start()
	t.Cleanup(func() {
		if n.cmd != nil {
			n.stop()
		}
		_ = c.Client().CoreV1().Nodes().Delete(context.Background(), n.name, metav1.DeleteOptions{})
		if t.Failed() {
			t.Logf("upstream kubelet log:\n%s", tail(n.log(), 40))
		}
	})
	// Before the kubelet stops: its pods go while it runs.
	t.Cleanup(cn.deleteAllPods)
	cn.waitNodeReady(t, v1.ConditionTrue, 90*time.Second)
	return cn
}

// upstreamConfig is the upstream kubelet's configuration as a node of
// the suite cluster: the comparison settings, on its private runtime.
func upstreamConfig(n *node, caFile string) string {
	return kubeletconfig.Comparison{Endpoint: n.rt.endpoint, CgroupRoot: n.rt.cgroupRoot, Port: n.apiPort,
		HealthzPort: n.healthzPort, ClientCAFile: caFile, Taints: []string{upstreamTaint}}.YAML()
}

// launchUpstream starts the upstream kubelet with the node's arguments.
func (n *node) launchUpstream(extraArgs ...string) error {
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	args := append([]string{
		"--config", n.config,
		"--root-dir", n.root,
		"--cert-dir", filepath.Join(filepath.Dir(n.root), "pki"),
		"--hostname-override", n.name,
		// cAdvisor's containerd factory: the runtime's socket, not /run/containerd's.
		"--containerd", n.rt.sock,
		"--v", "1",
	}, append(n.args, extraArgs...)...)
	n.cmd = exec.Command(upstreamKubeletBin, args...)
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := n.cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	n.exited = make(chan struct{})
	go func() { _ = n.cmd.Wait(); logf.Close(); close(n.exited) }()
	return nil
}

// keepFixedKubeletDir removes /var/lib/kubelet when the test ends if it
// did not exist before: the upstream kubelet makes it whatever its root
// directory, and kubeadm's preflight refuses a machine that has it.
func keepFixedKubeletDir(t *testing.T) {
	const fixedDir = "/var/lib/kubelet"
	if _, err := os.Stat(fixedDir); err == nil {
		return
	}
	t.Cleanup(func() { _ = os.RemoveAll(fixedDir) })
}

// tolerateUpstream lets a pod that a controller places (a DaemonSet's)
// run on upstream nodes too.
func tolerateUpstream(spec *v1.PodSpec) {
	spec.Tolerations = append(spec.Tolerations, v1.Toleration{Key: upstreamTaint, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule})
}
