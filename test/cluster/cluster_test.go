//go:build e2e

package cluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// The control plane binaries (hack/build-tools.sh) are in <repo>/_output/bin.
// Run with: go test -tags e2e -count=1 ./test/cluster/

func clientFor(t *testing.T, kubeconfig string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func poll(t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s (last error: %v)", what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// assertNothingLeft checks that no child of the test binary and no member
// of the given process groups is alive.
func assertNothingLeft(t *testing.T, pgids map[string]int) {
	t.Helper()
	if kids := ChildProcesses(); len(kids) > 0 {
		t.Errorf("child processes left: %v", kids)
	}
	for name, g := range pgids {
		if m := groupMembers(g); len(m) > 0 {
			t.Errorf("%s: processes left in its group %d: %v", name, g, m)
		}
	}
}

func TestCluster(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	start := time.Now()
	c, err := Start(ctx, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("started in %s: %s", time.Since(start).Round(time.Millisecond), c.APIServerURL())
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			c.Stop()
		}
	})
	pids := c.PIDs()
	if len(pids) != 4 {
		t.Fatalf("PIDs() = %v, want 4 components", pids)
	}
	if ip := net.ParseIP(c.Options().AdvertiseAddress); ip == nil || ip.IsLoopback() {
		t.Errorf("advertise address %q", c.Options().AdvertiseAddress)
	}

	t.Run("kubectl", func(t *testing.T) {
		kubectl := filepath.Join(c.Options().BinDir, "kubectl")
		if _, err := os.Stat(kubectl); err != nil {
			t.Skip("no kubectl in BinDir")
		}
		out, err := exec.Command(kubectl, "--kubeconfig", c.AdminKubeconfig(), "get", "ns", "-o", "name").CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl get ns: %v\n%s", err, out)
		}
		for _, ns := range []string{"namespace/default", "namespace/kube-system"} {
			if !strings.Contains(string(out), ns) {
				t.Errorf("kubectl get ns: no %s in\n%s", ns, out)
			}
		}
	})

	t.Run("client-go", func(t *testing.T) {
		cs := clientFor(t, c.AdminKubeconfig())
		nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(nss.Items) < 4 { // default, kube-node-lease, kube-public, kube-system
			t.Errorf("namespaces: %d", len(nss.Items))
		}
		// The kubernetes Service has the first Service IP and, with a
		// non-loopback advertise address, an endpoint.
		svc, err := c.Client().CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if svc.Spec.ClusterIP != "10.96.0.1" {
			t.Errorf("kubernetes Service ClusterIP %s", svc.Spec.ClusterIP)
		}
		poll(t, 30*time.Second, "the kubernetes EndpointSlice", func() (bool, error) {
			es, err := c.Client().DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return len(es.Endpoints) == 1 && len(es.Endpoints[0].Addresses) == 1 && es.Endpoints[0].Addresses[0] == c.Options().AdvertiseAddress, nil
		})
	})

	t.Run("NodeRestriction", func(t *testing.T) {
		kc := filepath.Join(t.TempDir(), "node-x.kubeconfig")
		if err := c.NodeKubeconfig("x", kc); err != nil {
			t.Fatal(err)
		}
		node := clientFor(t, kc)
		t.Cleanup(func() {
			for _, n := range []string{"x", "y"} {
				c.Client().CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{})
			}
		})
		if _, err := node.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("system:node:x creating node x: %v", err)
		}
		_, err := node.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "y"}}, metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("system:node:x creating node y: got %v, want Forbidden", err)
		}
		t.Logf("node y: %v", err)
		// The controller-manager gives the node a podCIDR from ClusterCIDR.
		_, clusterNet, _ := net.ParseCIDR(c.Options().ClusterCIDR)
		poll(t, 30*time.Second, "node x's podCIDR", func() (bool, error) {
			n, err := node.CoreV1().Nodes().Get(ctx, "x", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			ip, podNet, err := net.ParseCIDR(n.Spec.PodCIDR)
			if err != nil {
				return false, err
			}
			ones, _ := podNet.Mask.Size()
			if ones != 24 || !clusterNet.Contains(ip) {
				t.Fatalf("podCIDR %s not a /24 of %s", n.Spec.PodCIDR, clusterNet)
			}
			return true, nil
		})
	})

	t.Run("Namespace", func(t *testing.T) {
		ns := c.NewNamespace(ctx, t)
		if !strings.HasPrefix(ns, "e2e-") {
			t.Errorf("namespace %q", ns)
		}
		poll(t, 30*time.Second, "kube-root-ca.crt in "+ns, func() (bool, error) {
			_, err := c.Client().CoreV1().ConfigMaps(ns).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
			return err == nil, err
		})
		// ServiceAccount admission accepts a pod now.
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}
		got, err := c.Client().CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Spec.ServiceAccountName != "default" {
			t.Errorf("pod's ServiceAccount %q", got.Spec.ServiceAccountName)
		}
	})

	t.Run("BootstrapToken", func(t *testing.T) {
		token, err := c.CreateBootstrapToken(ctx)
		if err != nil {
			t.Fatal(err)
		}
		kc := filepath.Join(t.TempDir(), "bootstrap.kubeconfig")
		if err := c.BootstrapKubeconfig(token, kc); err != nil {
			t.Fatal(err)
		}
		boot := clientFor(t, kc)
		// As a kubelet does: a CSR for system:node:boot, auto-approved and
		// signed by the controller-manager.
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
			Subject: pkix.Name{CommonName: "system:node:boot", Organization: []string{"system:nodes"}},
		}, key)
		if err != nil {
			t.Fatal(err)
		}
		csr, err := boot.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "csr-"},
			Spec: certificatesv1.CertificateSigningRequestSpec{
				Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
				SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
				Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating a CSR with the bootstrap token: %v", err)
		}
		t.Cleanup(func() {
			c.Client().CertificatesV1().CertificateSigningRequests().Delete(context.Background(), csr.Name, metav1.DeleteOptions{})
		})
		var certPEM []byte
		poll(t, 30*time.Second, "the CSR to be approved and signed", func() (bool, error) {
			got, err := boot.CertificatesV1().CertificateSigningRequests().Get(ctx, csr.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			certPEM = got.Status.Certificate
			return len(certPEM) > 0, nil
		})
		b, _ := pem.Decode(certPEM)
		if b == nil {
			t.Fatalf("certificate %q", certPEM)
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		caPEM, err := os.ReadFile(c.CAFile())
		if err != nil {
			t.Fatal(err)
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(caPEM)
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("issued certificate does not verify against the CA: %v", err)
		}
		if cert.Subject.CommonName != "system:node:boot" {
			t.Errorf("issued certificate for %q", cert.Subject.CommonName)
		}
	})

	t.Run("Load", func(t *testing.T) {
		l, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Check(); err != nil {
			t.Fatal(err)
		}
		if l.APIServerURL() != c.APIServerURL() {
			t.Errorf("Load: APIServerURL %s, want %s", l.APIServerURL(), c.APIServerURL())
		}
		for n, p := range l.PIDs() {
			if pids[n] != p {
				t.Errorf("Load: %s pid %d, want %d", n, p, pids[n])
			}
		}
		if _, err := l.Client().CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
			t.Error(err)
		}
	})

	// Starting a second cluster in the same Dir is refused.
	if _, err := Start(ctx, Options{Dir: dir}); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("second Start in the same Dir: %v", err)
	}

	start = time.Now()
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped = true
	t.Logf("stopped in %s", time.Since(start).Round(time.Millisecond))
	assertNothingLeft(t, pids)
	if l, err := Load(dir); err != nil || l.Running() || l.Check() == nil {
		t.Errorf("after Stop, Load(dir) = %v, %v", l, err)
	}
	if err := c.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

// A component that dies during Start makes Start fail with its log, and
// stop what it started.
func TestStartFailure(t *testing.T) {
	_, err := Start(context.Background(), Options{Dir: t.TempDir(), ExtraAPIServerArgs: []string{"--no-such-flag"}})
	if err == nil {
		t.Fatal("Start with a bad apiserver flag succeeded")
	}
	t.Log(err)
	if !strings.Contains(err.Error(), "kube-apiserver") || !strings.Contains(err.Error(), "no-such-flag") {
		t.Errorf("error does not show the apiserver's log: %v", err)
	}
	assertNothingLeft(t, nil)
}

// Cancelling Start's context stops what it started.
func TestStartCancel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := Start(ctx, Options{Dir: t.TempDir()})
	if err == nil {
		c.Stop()
		t.Skip("the control plane started within 2s")
	}
	t.Log(err)
	assertNothingLeft(t, nil)
}

// With Options.Dir empty, Start makes a temporary directory and Stop removes it.
func TestTempDir(t *testing.T) {
	c, err := Start(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.Dir()); !os.IsNotExist(err) {
		t.Errorf("Dir %s after Stop: %v", c.Dir(), err)
	}
}
