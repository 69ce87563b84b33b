//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-sh/skiff/test/cluster"
)

// One control plane for the whole package run, started by the first test
// that needs it.
var (
	clusterOnce sync.Once
	theCluster  *cluster.Cluster
	clusterErr  error
)

func getCluster(t *testing.T) *cluster.Cluster {
	t.Helper()
	clusterOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		theCluster, clusterErr = cluster.Start(ctx, cluster.Options{})
	})
	if clusterErr != nil {
		t.Fatalf("starting the control plane: %v", clusterErr)
	}
	return theCluster
}

func stopCluster() {
	if theCluster != nil {
		if err := theCluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		}
	}
}

// clusterNode is a Skiff joined to the test control plane with its own
// node credentials (system:node:<name>), reaching the apiserver through a
// proxy the test can cut, and a fresh namespace for the test's pods.
type clusterNode struct {
	*node
	c     *cluster.Cluster
	admin kubernetes.Interface
	ns    string
	proxy *tcpProxy
}

func newClusterNode(t *testing.T) *clusterNode {
	t.Helper()
	c := getCluster(t)
	return joinCluster(t, c, newNode(t))
}

// newPrivateClusterNode is a cluster node of its own name on a private
// runtime (newPrivateNode), so its test runs in parallel. createPod binds
// the test's pods to it; the Node object goes with the test.
func newPrivateClusterNode(t *testing.T) *clusterNode {
	t.Helper()
	c := getCluster(t)
	n := newPrivateNode(t)
	n.name = fmt.Sprintf("%s-%d", nodeName, n.rt.id)
	// After the pods' deletion, which joinCluster's cleanup waits for.
	t.Cleanup(func() { _ = c.Client().CoreV1().Nodes().Delete(context.Background(), n.name, metav1.DeleteOptions{}) })
	return joinCluster(t, c, n)
}

func joinCluster(t *testing.T, c *cluster.Cluster, n *node) *clusterNode {
	t.Helper()
	cn := &clusterNode{node: n, c: c, admin: c.Client()}
	cn.ns = c.NewNamespace(context.Background(), t)
	apiURL := c.APIServerURL()
	cn.proxy = startProxy(t, strings.TrimPrefix(apiURL, "https://"))
	// Cleanups run last-in first-out: the test's pods go while Skiff runs
	// and still reaches the apiserver through the proxy.
	t.Cleanup(func() { cn.deleteAllPods() })
	kubeconfig := filepath.Join(filepath.Dir(n.config), "node.kubeconfig")
	must(t, c.NodeKubeconfig(n.hostname(), kubeconfig))
	b, err := os.ReadFile(kubeconfig)
	must(t, err)
	// The apiserver certificate is valid for 127.0.0.1, where the proxy is.
	must(t, os.WriteFile(kubeconfig, []byte(strings.ReplaceAll(string(b), apiURL, "https://"+cn.proxy.addr)), 0o600))
	n.args = append(n.args, "--kubeconfig", kubeconfig)
	n.setAuth(clusterAuth(c))
	return cn
}

// clusterAuth is the kubelet API's configuration of a cluster's node, as
// a real cluster's: on every address (the apiserver dials the node's
// InternalIP), client certificates of the cluster CA (the apiserver's
// kubelet client certificate), bearer tokens through TokenReview, and
// SubjectAccessReviews (upstream's defaults for the last two).
func clusterAuth(c *cluster.Cluster) string {
	return fmt.Sprintf(`address: 0.0.0.0
authentication:
  x509:
    clientCAFile: %s
`, c.CAFile())
}

func (cn *clusterNode) ctx() context.Context { return context.Background() }

// deleteAllPods deletes the test's pods and waits until Skiff has removed
// them, so no pod outlives its test on the shared node.
func (cn *clusterNode) deleteAllPods() {
	ctx := context.Background()
	pods := cn.admin.CoreV1().Pods(cn.ns)
	var uids []string
	if list, err := pods.List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range list.Items {
			uids = append(uids, string(p.UID))
		}
	}
	_ = pods.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		list, err := pods.List(ctx, metav1.ListOptions{})
		// Skiff removes a pod's volumes after its API object is gone.
		if err == nil && len(list.Items) == 0 && cn.podDirsGone(uids) {
			return
		}
		time.Sleep(300 * time.Millisecond)
	}
	cn.t.Errorf("pods of %s were not deleted (with their volumes) within 60s", cn.ns)
	// Skiff did not finish it: force them out.
	grace := int64(0)
	_ = pods.DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &grace}, metav1.ListOptions{})
}

// podDirsGone reports whether Skiff has removed the pod directories
// (volumes included) under its root: of the pods with these UIDs on the
// shared node, of every pod on a node of the test's own.
func (cn *clusterNode) podDirsGone(uids []string) bool {
	dir := filepath.Join(cn.root, "pods")
	if cn.shared {
		for _, uid := range uids {
			if _, err := os.Lstat(filepath.Join(dir, uid)); err == nil {
				return false
			}
		}
		return true
	}
	entries, err := os.ReadDir(dir)
	return err != nil || len(entries) == 0
}

// getNode returns the Node object of the test node.
func (cn *clusterNode) getNode(t *testing.T) *v1.Node {
	t.Helper()
	n, err := cn.admin.CoreV1().Nodes().Get(cn.ctx(), cn.hostname(), metav1.GetOptions{})
	must(t, err)
	return n
}

func nodeReady(n *v1.Node) (v1.ConditionStatus, string) {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status, c.Message
		}
	}
	return "", ""
}

// waitNodeReady waits for the node's Ready condition to have status want.
func (cn *clusterNode) waitNodeReady(t *testing.T, want v1.ConditionStatus, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, fmt.Sprintf("node Ready=%s", want), func() (bool, error) {
		n, err := cn.admin.CoreV1().Nodes().Get(cn.ctx(), cn.hostname(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, nil // the apiserver may be briefly busy
		}
		s, _ := nodeReady(n)
		return s == want, nil
	})
}

// lease returns the node's Lease. Skiff creates it once the node is
// registered, apart from the node's status: a node just Ready may not
// have it yet, so a missing one is waited for.
func (cn *clusterNode) lease(t *testing.T) *coordinationv1.Lease {
	t.Helper()
	var l *coordinationv1.Lease
	waitFor(t, 30*time.Second, "the node's lease", func() (bool, error) {
		var err error
		l, err = cn.admin.CoordinationV1().Leases("kube-node-lease").Get(cn.ctx(), cn.hostname(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	return l
}

// createPod creates a pod in the test namespace. A pod bound to nodeName
// (as busyboxPod's are) is bound to this node, whatever its name.
func (cn *clusterNode) createPod(t *testing.T, p *v1.Pod) *v1.Pod {
	t.Helper()
	if p.Spec.NodeName == nodeName {
		p.Spec.NodeName = cn.hostname()
	}
	p, err := cn.admin.CoreV1().Pods(cn.ns).Create(cn.ctx(), p, metav1.CreateOptions{})
	must(t, err)
	return p
}

func (cn *clusterNode) getPod(t *testing.T, name string) *v1.Pod {
	t.Helper()
	p, err := cn.admin.CoreV1().Pods(cn.ns).Get(cn.ctx(), name, metav1.GetOptions{})
	must(t, err)
	return p
}

// waitPod waits until cond holds for the API pod.
func (cn *clusterNode) waitPod(t *testing.T, ns, name string, timeout time.Duration, what string, cond func(*v1.Pod) bool) *v1.Pod {
	t.Helper()
	var got *v1.Pod
	met := false
	defer func() {
		// waitFor's Fatalf ends the test here: say where the pod was.
		if !met && got != nil {
			t.Logf("pod %s/%s when the wait ended: %s", ns, name, podSummary(got))
		}
	}()
	waitFor(t, timeout, fmt.Sprintf("pod %s/%s: %s", ns, name, what), func() (bool, error) {
		p, err := cn.admin.CoreV1().Pods(ns).Get(cn.ctx(), name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		got = p
		return cond(p), nil
	})
	met = true
	return got
}

// podSummary is a pod's phase, conditions and container states, to show
// a failed wait's last sight of it.
func podSummary(p *v1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "phase %s", p.Status.Phase)
	if p.Status.Reason != "" {
		fmt.Fprintf(&b, " (%s: %s)", p.Status.Reason, p.Status.Message)
	}
	for _, c := range p.Status.Conditions {
		fmt.Fprintf(&b, "; %s=%s", c.Type, c.Status)
		if c.Reason != "" {
			fmt.Fprintf(&b, " %s", c.Reason)
		}
	}
	statuses := append(append([]v1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, c := range statuses {
		fmt.Fprintf(&b, "; container %s restarts %d", c.Name, c.RestartCount)
		switch st := c.State; {
		case st.Waiting != nil:
			fmt.Fprintf(&b, " waiting %s: %s", st.Waiting.Reason, st.Waiting.Message)
		case st.Running != nil:
			b.WriteString(" running")
		case st.Terminated != nil:
			fmt.Fprintf(&b, " terminated %s exit %d: %s", st.Terminated.Reason, st.Terminated.ExitCode, st.Terminated.Message)
		}
	}
	return b.String()
}

func isReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// busyboxPod is a pod bound to the test node running script. It mounts no
// service account token (TestServiceAccountTokenVolume covers that), which
// keeps each pod's start to what its test is about.
func busyboxPod(name, script string) *v1.Pod {
	grace := int64(5)
	no := false
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{testLabel: "true"}},
		Spec: v1.PodSpec{
			NodeName:                      nodeName,
			TerminationGracePeriodSeconds: &grace,
			AutomountServiceAccountToken:  &no,
			Containers: []v1.Container{{
				Name: "main", Image: busybox, ImagePullPolicy: v1.PullNever,
				Command: []string{"sh", "-c", script},
			}},
		},
	}
}

// traceDir is a host directory any container user may write, and the
// volume and mount that put it at /trace: tests read there what
// containers note.
func traceDir(t *testing.T) (string, []v1.Volume, []v1.VolumeMount) {
	t.Helper()
	dir := t.TempDir()
	must(t, os.Chmod(dir, 0o777))
	dirType := v1.HostPathDirectory
	vol := []v1.Volume{{Name: "trace", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: dir, Type: &dirType}}}}
	return dir, vol, []v1.VolumeMount{{Name: "trace", MountPath: "/trace"}}
}

// sleeper traps TERM so deletion is prompt, as a well-behaved workload.
// The shell waits for each sleep in the background: a trap runs only
// once the foreground command is done, and would otherwise wait for up
// to a second of it, a random delay in every deletion a test times.
const sleeper = "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"

// tcpProxy forwards connections to an upstream address until cut.
type tcpProxy struct {
	addr     string
	upstream string
	mu       sync.Mutex
	l        net.Listener
	conns    map[net.Conn]bool
}

func startProxy(t *testing.T, upstream string) *tcpProxy {
	t.Helper()
	p := &tcpProxy{addr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), upstream: upstream, conns: map[net.Conn]bool{}}
	must(t, p.listen())
	t.Cleanup(p.cut)
	return p
}

func (p *tcpProxy) listen() error {
	l, err := net.Listen("tcp", p.addr)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.l = l
	p.mu.Unlock()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
	return nil
}

func (p *tcpProxy) forward(c net.Conn) {
	u, err := net.Dial("tcp", p.upstream)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[u] = true, true
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(u, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, u); done <- struct{}{} }()
	<-done
	c.Close()
	u.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, u)
	p.mu.Unlock()
}

// cut makes the apiserver unreachable: no listener, every connection closed.
func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l != nil {
		p.l.Close()
		p.l = nil
	}
	for c := range p.conns {
		c.Close()
	}
}

// restore makes the apiserver reachable again on the same address.
func (p *tcpProxy) restore(t *testing.T) {
	t.Helper()
	must(t, p.listen())
}
