//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The add-ons `make up` runs (hack/addons.sh, hack/addons/*.yaml) on the
// shared node: kube-proxy, CoreDNS and metrics-server as pods, from the
// same manifests, in the test's namespace. A pod reaches another through
// a Service by its DNS name, and `kubectl top pod` answers.
//
// Where the test differs from make up, and why: the add-ons run on the
// shared node only (a node selector); cluster-scoped objects carry the
// namespace as a suffix; the kube-dns address is allocated, so the client
// pod names it in its dnsConfig as the node's clusterDNS would (the
// shared node has none, and other tests' pods must keep the host's
// resolver); the shared node serves a self-signed certificate, so
// metrics-server runs with --kubelet-insecure-tls.
//
// kube-proxy writes the host's iptables: it is this cluster's only proxy
// in the suite (make e2e refuses to run beside make up), and at the end
// its pods are stopped first and `kube-proxy --cleanup` removes its rules.
func TestAddOnsServiceDNSAndTop(t *testing.T) {
	cn := sharedNode(t)

	// A web server behind a Service (started while the add-ons come up),
	// and a client that finds it by name.
	web := busyboxPod("web", "mkdir /www && echo served-by-$(hostname) >/www/index.html && exec httpd -f -p 8080 -h /www")
	web.Labels["app"] = "web"
	cn.createPod(t, web)
	_, err := cn.admin.CoreV1().Services(cn.ns).Create(cn.ctx(), &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: v1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []v1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}, metav1.CreateOptions{})
	must(t, err)
	deployAddOns(t, cn)
	dns, err := cn.admin.CoreV1().Services(cn.ns).Get(cn.ctx(), "kube-dns", metav1.GetOptions{})
	must(t, err)

	name := fmt.Sprintf("web.%s.svc.cluster.local", cn.ns)
	// busybox's nc resolves the name through the pod's resolv.conf (its
	// wget, linked statically against glibc, crashes in a container).
	client := busyboxPod("client", fmt.Sprintf("until printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 2 %s 80 | grep served-by; do sleep 1; done", name))
	client.Spec.RestartPolicy = v1.RestartPolicyNever
	// What the kubelet writes for dnsPolicy ClusterFirst.
	client.Spec.DNSPolicy = v1.DNSNone
	ndots := "5"
	client.Spec.DNSConfig = &v1.PodDNSConfig{
		Nameservers: []string{dns.Spec.ClusterIP},
		Searches:    []string{cn.ns + ".svc.cluster.local", "svc.cluster.local", "cluster.local"},
		Options:     []v1.PodDNSConfigOption{{Name: "ndots", Value: &ndots}},
	}
	cn.createPod(t, client)
	cn.waitPod(t, cn.ns, "client", 90*time.Second, "Succeeded", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
	})
	out, err := cn.admin.CoreV1().Pods(cn.ns).GetLogs("client", &v1.PodLogOptions{}).DoRaw(cn.ctx())
	must(t, err)
	if !strings.Contains(string(out), "served-by-web") {
		t.Fatalf("the client did not get the web pod's page through %s; it printed:\n%s", name, out)
	}
	// The Service's address was kube-proxy's doing: its rules name it.
	if save, _ := exec.Command("iptables-save", "-t", "nat").Output(); !bytes.Contains(save, []byte(cn.ns+"/web")) {
		t.Errorf("no kube-proxy rule in the host's nat table names the Service %s/web", cn.ns)
	}

	// kubectl top, through the aggregated Metrics API.
	var top []byte
	waitFor(t, 120*time.Second, "kubectl top pod web", func() (bool, error) {
		top, err = kubectl(cn.c, "-n", cn.ns, "top", "pod", "web", "--no-headers").CombinedOutput()
		return err == nil, nil
	})
	if f := strings.Fields(string(top)); len(f) != 3 || f[0] != "web" || !strings.HasSuffix(f[1], "m") || !strings.HasSuffix(f[2], "Mi") {
		t.Errorf("kubectl top pod web: %q, want NAME CPU(cores) MEMORY(bytes)", top)
	}
}

// deployAddOns builds and imports the add-on images, applies their
// manifests in the test's namespace and waits until each serves; cleanup
// removes them and kube-proxy's rules.
func deployAddOns(t *testing.T, cn *clusterNode) {
	t.Helper()
	if out, err := exec.Command("../../hack/addons.sh", "images").CombinedOutput(); err != nil {
		t.Fatalf("hack/addons.sh images: %v\n%s", err, out)
	}
	render := func(names ...string) []byte {
		cmd := exec.Command("../../hack/addons.sh", append([]string{"render"}, names...)...)
		cmd.Env = append(os.Environ(),
			"ADDONS_NAMESPACE="+cn.ns, "ADDONS_SUFFIX=-"+cn.ns, "ADDONS_NODE="+cn.hostname(),
			"ADDONS_API_SERVER="+cn.c.APIServerURL(), "ADDONS_CLUSTER_CIDR="+cn.podSubnet(),
			"ADDONS_DNS_IP=", "ADDONS_KUBELET_TLS=--kubelet-insecure-tls")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("hack/addons.sh render: %v", err)
		}
		// The suite removes every sandbox of a pod with testLabel when it
		// ends; the pod templates' labels are the only ones indented so.
		return bytes.ReplaceAll(out, []byte("\n        k8s-app: "), []byte("\n        "+testLabel+": \"true\"\n        k8s-app: "))
	}
	pods, api := render("kube-proxy", "coredns", "metrics-server"), render("metrics-apiservice")
	apply := func(manifests []byte) {
		t.Helper()
		cmd := kubectl(cn.c, "apply", "-f", "-")
		cmd.Stdin = bytes.NewReader(manifests)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kubectl apply: %v\n%s", err, out)
		}
	}
	t.Cleanup(func() { removeAddOns(t, cn, pods, api) })
	apply(pods)
	for _, app := range []string{"kube-proxy", "kube-dns", "metrics-server"} {
		waitFor(t, 120*time.Second, app+" ready", func() (bool, error) {
			list, err := cn.admin.CoreV1().Pods(cn.ns).List(cn.ctx(), metav1.ListOptions{LabelSelector: "k8s-app=" + app})
			return err == nil && len(list.Items) == 1 && isReady(&list.Items[0]), nil
		})
	}
	apply(api)
}

// removeAddOns deletes the Metrics API first (an APIService without its
// server fails discovery cluster-wide), then the add-ons, waits until
// kube-proxy's pod is gone and removes its rules from the host.
func removeAddOns(t *testing.T, cn *clusterNode, pods, api []byte) {
	del := func(manifests []byte) {
		cmd := kubectl(cn.c, "delete", "--ignore-not-found", "--wait", "-f", "-")
		cmd.Stdin = bytes.NewReader(manifests)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("kubectl delete: %v\n%s", err, out)
		}
	}
	del(api)
	del(pods)
	// Skiff deletes a pod's API object once its containers are stopped.
	deadline := time.Now().Add(60 * time.Second)
	for {
		list, err := cn.admin.CoreV1().Pods(cn.ns).List(cn.ctx(), metav1.ListOptions{LabelSelector: "k8s-app=kube-proxy"})
		if err == nil && len(list.Items) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("kube-proxy's pod still exists 60s after its DaemonSet was deleted")
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if out, err := exec.Command("../../_output/bin/kube-proxy", "--cleanup").CombinedOutput(); err != nil {
		t.Errorf("kube-proxy --cleanup: %v\n%s", err, tail(string(out), 20))
	}
	if err := exec.Command("iptables", "-t", "nat", "-n", "-L", "KUBE-SERVICES").Run(); err == nil {
		t.Errorf("the host's nat table still has kube-proxy's KUBE-SERVICES chain after kube-proxy --cleanup")
	}
}
