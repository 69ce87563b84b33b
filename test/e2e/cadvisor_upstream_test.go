//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// upstreamKubelet is the upstream kubelet built by hack/build-tools.sh.
const upstreamKubelet = "../../_output/bin/kubelet"

// The same pod on the shared Skiff and on an upstream kubelet v1.34 of
// the test's own (on a private containerd, joined to the suite cluster):
// /metrics/cadvisor through the node proxy gives the pod the same
// families, with the same types, help texts and label names, and the
// machine series are the same families too.
func TestCadvisorFamiliesMatchUpstreamKubelet(t *testing.T) {
	cn := sharedNode(t)
	rt := newPrivateRuntime(t)
	upName := fmt.Sprintf("e2e-upstream-%d", rt.id)
	startUpstreamKubelet(t, cn, rt, upName)

	ours, theirs := cadvisorPod("cadvisor-skiff"), cadvisorPod("cadvisor-upstream")
	ours = cn.createPod(t, ours)
	theirs.Spec.NodeName = upName
	_, err := cn.admin.CoreV1().Pods(cn.ns).Create(cn.ctx(), theirs, metav1.CreateOptions{})
	must(t, err)
	t.Cleanup(func() {
		// Gone before the upstream kubelet stops (cleanups run in reverse).
		zero := int64(0)
		_ = cn.admin.CoreV1().Pods(cn.ns).Delete(cn.ctx(), theirs.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	for _, p := range []string{ours.Name, theirs.Name} {
		cn.waitPod(t, cn.ns, p, 90*time.Second, "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	}

	var skiff, upstream map[string]string
	waitFor(t, 60*time.Second, "both kubelets' series of their pod", func() (bool, error) {
		skiff = podFamilies(parseScrape(t, cn.proxyGetNode(t, cn.hostname(), "metrics/cadvisor")), cn.ns, ours.Name)
		upstream = podFamilies(parseScrape(t, cn.proxyGetNode(t, upName, "metrics/cadvisor")), cn.ns, theirs.Name)
		// cAdvisor finds a new container on its next housekeeping.
		return hasSeries(skiff, "container") && hasSeries(upstream, "container"), nil
	})
	names := map[string]bool{}
	for n := range skiff {
		names[n] = true
	}
	for n := range upstream {
		names[n] = true
	}
	var diffs []string
	for n := range names {
		s, u := skiff[n], upstream[n]
		if s == u || cadvisorOptional[n] && (s == "" || u == "") {
			continue
		}
		diffs = append(diffs, fmt.Sprintf("%s\n  skiff    %q\n  upstream %q", n, s, u))
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		t.Errorf("families differ from the upstream kubelet's:\n%s", strings.Join(diffs, "\n"))
	}
	t.Logf("%d families compared", len(names))
}

func cadvisorPod(name string) *v1.Pod {
	p := busyboxPod(name, "while :; do sleep 1; done")
	p.Spec.Containers[0].Resources.Limits = v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("48Mi")}
	return p
}

// podFamilies is the families of a scrape restricted to the pod's series
// (the machine's and the scrape's own families whole), by name, as
// signature lines; a "kinds" entry notes which of the pod's cgroups
// (pod, sandbox, container) have series.
func podFamilies(mfs map[string]*dto.MetricFamily, ns, pod string) map[string]string {
	out := map[string]string{}
	kinds := map[string]bool{}
	for name, mf := range mfs {
		keep := &dto.MetricFamily{Name: mf.Name, Help: mf.Help, Type: mf.Type}
		for _, m := range mf.GetMetric() {
			l := labelsOf(m)
			if _, perContainer := l["pod"]; perContainer && (l["pod"] != pod || l["namespace"] != ns) {
				continue
			}
			if _, ok := l["pod"]; ok {
				switch {
				case l["container"] != "":
					kinds["container"] = true
				case l["image"] != "":
					kinds["sandbox"] = true
				default:
					kinds["pod"] = true
				}
			}
			keep.Metric = append(keep.Metric, m)
		}
		if len(keep.Metric) > 0 {
			out[name] = signature(keep)
		}
	}
	var k []string
	for kind := range kinds {
		k = append(k, kind)
	}
	sort.Strings(k)
	out["kinds"] = strings.Join(k, ",")
	return out
}

func hasSeries(families map[string]string, kind string) bool {
	return strings.Contains(families["kinds"], kind)
}

// proxyGetNode gets a kubelet path of the named node through the
// apiserver's node proxy.
func (cn *clusterNode) proxyGetNode(t *testing.T, node, p string) []byte {
	t.Helper()
	b, err := cn.admin.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy", p).DoRaw(cn.ctx())
	must(t, err)
	return b
}

// startUpstreamKubelet runs the upstream kubelet as node name on rt,
// joined to cn's cluster, until the test ends, and waits for its Node to
// be Ready. It is tainted so that no workload of another test lands on it.
func startUpstreamKubelet(t *testing.T, cn *clusterNode, rt *privateRuntime, name string) {
	t.Helper()
	if _, err := os.Stat(upstreamKubelet); err != nil {
		t.Fatalf("the upstream kubelet (hack/build-tools.sh kubelet): %v", err)
	}
	dir := filepath.Join(rt.dir, "upstream-kubelet")
	must(t, os.MkdirAll(dir, 0o755))
	proxy := startProxy(t, strings.TrimPrefix(cn.c.APIServerURL(), "https://"))
	kubeconfig := filepath.Join(dir, "kubeconfig")
	must(t, cn.c.NodeKubeconfig(name, kubeconfig))
	b, err := os.ReadFile(kubeconfig)
	must(t, err)
	// The apiserver certificate is valid for 127.0.0.1, where the proxy is.
	must(t, os.WriteFile(kubeconfig, []byte(strings.ReplaceAll(string(b), cn.c.APIServerURL(), "https://"+proxy.addr)), 0o600))
	config := filepath.Join(dir, "config.yaml")
	must(t, os.WriteFile(config, []byte(fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: %s
cgroupDriver: cgroupfs
cgroupRoot: %s
failSwapOn: false
address: 0.0.0.0
port: %d
healthzPort: %d
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
authentication:
  x509:
    clientCAFile: %s
  anonymous:
    enabled: false
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%%"
  imagefs.available: "1%%"
  nodefs.inodesFree: "1%%"
resolvConf: /etc/resolv.conf
clusterDomain: cluster.local
registerWithTaints:
- key: skiff.e2e/upstream
  effect: NoSchedule
`, rt.endpoint, rt.cgroupRoot, freePort(t), freePort(t), cn.c.CAFile())), 0o644))
	// Unlike Skiff, the upstream kubelet wants its cgroupRoot to exist
	// (rt's cleanup removes it).
	makeCgroupRoot(t, rt.cgroupRoot)
	// The upstream kubelet makes /var/lib/kubelet whatever its root dir;
	// left behind, kubeadm's preflight refuses the machine.
	const fixedDir = "/var/lib/kubelet"
	_, statErr := os.Stat(fixedDir)
	logPath := filepath.Join(dir, "kubelet.log")
	logf, err := os.Create(logPath)
	must(t, err)
	cmd := exec.Command(upstreamKubelet, "--config", config, "--kubeconfig", kubeconfig,
		"--root-dir", filepath.Join(dir, "root"), "--cert-dir", filepath.Join(dir, "pki"),
		"--hostname-override", name, "--v", "1",
		// cAdvisor's containerd factory: the runtime's socket, not /run/containerd's.
		"--containerd", rt.sock)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	must(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		_ = cn.admin.CoreV1().Nodes().Delete(cn.ctx(), name, metav1.DeleteOptions{})
		if os.IsNotExist(statErr) {
			_ = os.RemoveAll(fixedDir)
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("upstream kubelet log:\n%s", tail(string(b), 40))
		}
	})
	waitFor(t, 90*time.Second, "the upstream kubelet's Node Ready", func() (bool, error) {
		select {
		case <-exited:
			b, _ := os.ReadFile(logPath)
			return false, fmt.Errorf("the upstream kubelet exited: %s", tail(string(b), 20))
		default:
		}
		n, err := cn.admin.CoreV1().Nodes().Get(cn.ctx(), name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		s, _ := nodeReady(n)
		return s == v1.ConditionTrue, nil
	})
}

// makeCgroupRoot makes the cgroup root in every v1 hierarchy, or in the
// unified one on a v2 host.
func makeCgroupRoot(t *testing.T, root string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(cgroupMount, "cgroup.controllers")); err == nil {
		must(t, os.MkdirAll(filepath.Join(cgroupMount, root), 0o755))
		return
	}
	entries, err := os.ReadDir(cgroupMount)
	must(t, err)
	for _, e := range entries {
		if e.IsDir() {
			must(t, os.MkdirAll(filepath.Join(cgroupMount, e.Name(), root), 0o755))
		}
	}
}
