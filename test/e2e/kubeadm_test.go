//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/test/cluster"
)

const (
	kubeadmNodeName = "kubeadm-node"
	kubeadmProvider = "skiff-e2e://kubeadm-node"
	// What kubeadm writes on the host, as on a real node.
	kubeadmEtc        = "/etc/kubernetes"
	kubeadmKubeletDir = "/var/lib/kubelet"
	kubeadmDefaults   = "/etc/default/kubelet"
	// kubeadmMarker says this test made the directory, so a run cut short
	// may clean it up; anything else found there stops the test.
	kubeadmMarker = ".skiff-e2e-kubeadm"
)

// kubeadm runs the real kubeadm v1.34.4 with kubeletBin first on PATH.
func kubeadm(t *testing.T, binDir string, args ...string) string {
	t.Helper()
	bin, err := filepath.Abs("../../_output/bin/kubeadm")
	must(t, err)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "PATH="+binDir+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubeadm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Skiff as the kubelet of a node joined by kubeadm: the control plane is
// prepared with kubeadm's own init phases, `kubeadm join` runs with Skiff
// as `kubelet` on PATH, started the way kubeadm's systemd unit starts it.
func TestKubeadmJoin(t *testing.T) {
	serialOnDevRuntime(t)
	c := getCluster(t)
	claimKubeadmPaths(t)
	removeTestPods()
	dir := t.TempDir()
	binDir := filepath.Join(dir, "bin")
	must(t, os.MkdirAll(binDir, 0o755))
	must(t, os.Symlink(skiffBin, filepath.Join(binDir, "kubelet")))
	token := kubeadmToken(t)

	// The control plane, as `kubeadm init` would have left it: its
	// ClusterConfiguration and the kubelet's configuration uploaded, the
	// bootstrap token, cluster-info and the bootstrap and CSR RBAC.
	// The kubelet's ports come from the uploaded configuration, as an
	// operator may set them, and are free ones: the machine's :10250 may be
	// anyone's (a kubelet of its own, an outgoing connection's source port).
	apiPort, healthzPort := freePort(t), freePort(t)
	initCfg := filepath.Join(dir, "init.yaml")
	must(t, os.WriteFile(initCfg, []byte(kubeadmInitConfig(c, token, apiPort, healthzPort)), 0o600))
	for _, phase := range [][]string{{"upload-config", "kubeadm"}, {"upload-config", "kubelet"}, {"bootstrap-token"}} {
		args := append([]string{"init", "phase"}, phase...)
		kubeadm(t, binDir, append(args, "--config", initCfg, "--kubeconfig", c.AdminKubeconfig())...)
	}

	// The node: kubelet.service enabled before the join, so the kubelet
	// restarts until kubeadm has written its files, as on a real node.
	must(t, os.WriteFile(kubeadmDefaults, []byte("KUBELET_EXTRA_ARGS=--v=2\n"), 0o644))
	unit := &kubeletUnit{t: t, bin: filepath.Join(binDir, "kubelet"), logPath: filepath.Join(dir, "kubelet.log"), restartDelay: 10 * time.Second}
	unit.start()
	t.Cleanup(func() { kubeadmCleanup(t, c, unit) })

	joinCfg := filepath.Join(dir, "join.yaml")
	must(t, os.WriteFile(joinCfg, []byte(kubeadmJoinConfig(t, c, token)), 0o600))
	// One preflight error is ignored: Port-10250, which kubeadm checks
	// whatever port the kubelet's configuration gives, and this kubelet
	// does not use. KubeletVersion runs `kubelet --version` (Skiff) and
	// must parse. On this machine the rest only warn (cgroup v1, the node
	// name not resolving, no systemd unit).
	out := kubeadm(t, binDir, "join", "--config", joinCfg, "--ignore-preflight-errors=Port-10250", "-v=1")
	t.Logf("kubeadm join:\n%s", tail(out, 40))

	// TLS bootstrap: kubeadm waited for the kubeconfig Skiff writes; the
	// client certificate is the node's own.
	cert := readCert(t, filepath.Join(kubeadmKubeletDir, "pki", "kubelet-client-current.pem"))
	if cert.Subject.CommonName != "system:node:"+kubeadmNodeName {
		t.Errorf("client certificate for %q", cert.Subject.CommonName)
	}
	if _, err := os.Stat(filepath.Join(kubeadmEtc, "bootstrap-kubelet.conf")); !os.IsNotExist(err) {
		t.Errorf("kubeadm left the bootstrap kubeconfig behind: %v", err)
	}
	waitFor(t, 2*time.Minute, "node Ready", func() (bool, error) {
		n, err := c.Client().CoreV1().Nodes().Get(context.Background(), kubeadmNodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		s, _ := nodeReady(n)
		return s == v1.ConditionTrue, nil
	})
	checkKubeadmNode(t, c, apiPort)
	runKubeadmDeployment(t, c)
}

// checkKubeadmNode checks what the kubelet arguments kubeadm wrote
// (kubeletExtraArgs) and the uploaded configuration made of the Node.
func checkKubeadmNode(t *testing.T, c *cluster.Cluster, apiPort int) {
	t.Helper()
	n, err := c.Client().CoreV1().Nodes().Get(context.Background(), kubeadmNodeName, metav1.GetOptions{})
	must(t, err)
	if got := n.Status.DaemonEndpoints.KubeletEndpoint.Port; int(got) != apiPort {
		t.Errorf("kubelet endpoint port %d, want the uploaded configuration's %d", got, apiPort)
	}
	if n.Spec.ProviderID != kubeadmProvider {
		t.Errorf("spec.providerID = %q, want %q", n.Spec.ProviderID, kubeadmProvider)
	}
	found := false
	for _, taint := range n.Spec.Taints {
		if taint.Key == "node.cloudprovider.kubernetes.io/uninitialized" && taint.Effect == v1.TaintEffectNoSchedule {
			found = true
		}
	}
	if !found {
		t.Errorf("no uninitialized taint with --cloud-provider=external: %v", n.Spec.Taints)
	}
	if n.Labels["skiff.example/joined-by"] != "kubeadm" {
		t.Errorf("labels %v lack the --node-labels of kubeletExtraArgs", n.Labels)
	}
}

// runKubeadmDeployment runs a Deployment on the node and reaches its pod
// with kubectl logs and exec through the apiserver.
func runKubeadmDeployment(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	ctx := context.Background()
	ns := c.NewNamespace(ctx, t)
	one, no := int32(1), false
	labels := map[string]string{"app": "kubeadm-hello", testLabel: "true"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "hello"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1.PodSpec{
					NodeSelector:                 map[string]string{v1.LabelHostname: kubeadmNodeName},
					Tolerations:                  []v1.Toleration{{Key: "node.cloudprovider.kubernetes.io/uninitialized", Operator: v1.TolerationOpExists}},
					AutomountServiceAccountToken: &no,
					Containers: []v1.Container{{
						Name: "hello", Image: busybox, ImagePullPolicy: v1.PullNever,
						Command: []string{"sh", "-c", "echo hello from $(hostname); " + sleeper},
					}},
				},
			},
		},
	}
	_, err := c.Client().AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	must(t, err)
	t.Cleanup(func() { deleteKubeadmPods(t, c, ns) })
	waitFor(t, 3*time.Minute, "deployment available", func() (bool, error) {
		got, err := c.Client().AppsV1().Deployments(ns).Get(ctx, "hello", metav1.GetOptions{})
		return err == nil && got.Status.AvailableReplicas == 1, nil
	})
	pods, err := c.Client().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=kubeadm-hello"})
	must(t, err)
	if len(pods.Items) != 1 || pods.Items[0].Spec.NodeName != kubeadmNodeName {
		t.Fatalf("pods %v, want one on %s", pods.Items, kubeadmNodeName)
	}
	pod := pods.Items[0].Name
	want := "hello from " + pod
	waitFor(t, 30*time.Second, "kubectl logs", func() (bool, error) {
		out, err := kubectl(c, "-n", ns, "logs", "deploy/hello").CombinedOutput()
		return err == nil && strings.Contains(string(out), want), nil
	})
	out, err := kubectl(c, "-n", ns, "exec", pod, "--", "cat", "/etc/hostname").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != pod {
		t.Errorf("kubectl exec: %v: %q, want %q", err, out, pod)
	}
}

func deleteKubeadmPods(t *testing.T, c *cluster.Cluster, ns string) {
	ctx := context.Background()
	_ = c.Client().AppsV1().Deployments(ns).Delete(ctx, "hello", metav1.DeleteOptions{})
	waitFor(t, 90*time.Second, "the Deployment's pods gone", func() (bool, error) {
		pods, err := c.Client().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, nil
	})
}

func kubeadmInitConfig(c *cluster.Cluster, token string, apiPort, healthzPort int) string {
	o := c.Options()
	return fmt.Sprintf(`apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
bootstrapTokens:
- token: %q
  ttl: 1h
nodeRegistration:
  criSocket: %s
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: v1.34.4
controlPlaneEndpoint: %q
networking:
  serviceSubnet: %s
  podSubnet: %s
---
# The dev containerd uses cgroupfs (kubeadm's default is systemd); the
# pods' cgroups go under the e2e root the other tests clean. The disk
# thresholds are hostDiskConfig's: the machine's disk may be fuller than
# the defaults allow, and disk pressure would taint the node.
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupRoot: %s
port: %d
healthzPort: %d
%s`, token, criEndpoint, strings.TrimPrefix(c.APIServerURL(), "https://"), o.ServiceCIDR, o.ClusterCIDR, e2eCgroupRoot,
		apiPort, healthzPort, hostDiskConfig)
}

func kubeadmJoinConfig(t *testing.T, c *cluster.Cluster, token string) string {
	return fmt.Sprintf(`apiVersion: kubeadm.k8s.io/v1beta4
kind: JoinConfiguration
discovery:
  bootstrapToken:
    apiServerEndpoint: %q
    token: %q
    caCertHashes: [%q]
nodeRegistration:
  name: %s
  criSocket: %s
  kubeletExtraArgs:
  - {name: cloud-provider, value: external}
  - {name: provider-id, value: %q}
  - {name: node-ip, value: %q}
  - {name: node-labels, value: "skiff.example/joined-by=kubeadm"}
`, strings.TrimPrefix(c.APIServerURL(), "https://"), token, caCertHash(t, c.CAFile()), kubeadmNodeName, criEndpoint,
		kubeadmProvider, c.Options().AdvertiseAddress)
}

// caCertHash is kubeadm's --discovery-token-ca-cert-hash: the SHA-256 of
// the CA's SubjectPublicKeyInfo.
func caCertHash(t *testing.T, caFile string) string {
	t.Helper()
	b, err := os.ReadFile(caFile)
	must(t, err)
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s: no PEM", caFile)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	must(t, err)
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// kubeadmToken is a random bootstrap token, [a-z0-9]{6}.[a-z0-9]{16}.
func kubeadmToken(t *testing.T) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 22)
	for i := range b {
		n, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		must(t, err)
		b[i] = alphabet[n.Int64()]
	}
	return string(b[:6]) + "." + string(b[6:])
}

// claimKubeadmPaths makes sure what kubeadm writes on the host is free,
// or left by an earlier run of this test (its marker), which it removes.
func claimKubeadmPaths(t *testing.T) {
	t.Helper()
	for _, d := range []string{kubeadmEtc, kubeadmKubeletDir} {
		if _, err := os.Stat(d); os.IsNotExist(err) {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, kubeadmMarker)); err != nil {
			t.Fatalf("%s exists and was not made by this test: refusing to touch it", d)
		}
		removeKubeadmDir(t, d)
	}
	if b, err := os.ReadFile(kubeadmDefaults); err == nil && !strings.Contains(string(b), "KUBELET_EXTRA_ARGS=--v=2") {
		t.Fatalf("%s exists and was not made by this test: refusing to touch it", kubeadmDefaults)
	}
	for _, d := range []string{kubeadmEtc, kubeadmKubeletDir} {
		must(t, os.MkdirAll(d, 0o755))
		must(t, os.WriteFile(filepath.Join(d, kubeadmMarker), nil, 0o644))
	}
}

// kubeadmCleanup stops the kubelet, removes the Node and what kubeadm and
// the kubelet wrote on the host.
func kubeadmCleanup(t *testing.T, c *cluster.Cluster, unit *kubeletUnit) {
	unit.stop()
	if t.Failed() {
		if b, err := os.ReadFile(unit.logPath); err == nil {
			t.Logf("kubelet.service log:\n%s", tail(string(b), 150))
		}
	}
	removeTestPods()
	removeE2ECgroups(t)
	_ = c.Client().CoreV1().Nodes().Delete(context.Background(), kubeadmNodeName, metav1.DeleteOptions{})
	removeKubeadmDir(t, kubeadmEtc)
	removeKubeadmDir(t, kubeadmKubeletDir)
	_ = os.Remove(kubeadmDefaults)
}

// removeKubeadmDir unmounts what the kubelet mounted under dir (volumes),
// deepest first, then removes it.
func removeKubeadmDir(t *testing.T, dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	must(t, err)
	var mounts []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		// dir itself too: the kubelet makes its root directory a shared
		// bind mount of itself.
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			mounts = append(mounts, f[4])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(mounts)))
	for _, m := range mounts {
		if err := syscall.Unmount(m, 0); err != nil {
			_ = syscall.Unmount(m, syscall.MNT_DETACH)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Errorf("removing %s: %v", dir, err)
	}
}
