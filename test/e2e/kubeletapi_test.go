//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/test/cluster"
)

// kubeletURL is the kubelet API of the test node at its InternalIP, the
// address the apiserver dials.
func (cn *clusterNode) kubeletURL(t *testing.T, path string) string {
	t.Helper()
	for _, a := range cn.getNode(t).Status.Addresses {
		if a.Type == v1.NodeInternalIP {
			return fmt.Sprintf("https://%s:%d%s", a.Address, cn.apiPort, path)
		}
	}
	t.Fatalf("node has no InternalIP")
	return ""
}

// kubeletGet GETs path from the kubelet API with a bearer token (if any)
// and client certificate (if any); the serving certificate is
// self-signed, so it is not verified here (TestKubeletAPIAuth checks it).
func kubeletGet(t *testing.T, url, token string, cert *tls.Certificate) (int, string) {
	t.Helper()
	tc := &tls.Config{InsecureSkipVerify: true}
	if cert != nil {
		tc.Certificates = []tls.Certificate{*cert}
	}
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	req, err := http.NewRequest("GET", url, nil)
	must(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	must(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(t, err)
	return resp.StatusCode, string(b)
}

// serviceAccountToken makes a ServiceAccount in the test namespace,
// grants it rules on nodes' subresources (a ClusterRole and binding,
// removed at the end) and returns a token for it once the apiserver's
// authorizer agrees.
func (cn *clusterNode) serviceAccountToken(t *testing.T, name string, subresources ...string) (user, token string) {
	t.Helper()
	ctx := cn.ctx()
	_, err := cn.admin.CoreV1().ServiceAccounts(cn.ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	must(t, err)
	user = fmt.Sprintf("system:serviceaccount:%s:%s", cn.ns, name)
	if len(subresources) > 0 {
		roleName := cn.ns + "-" + name
		var resources []string
		for _, s := range subresources {
			resources = append(resources, "nodes/"+s)
		}
		_, err = cn.admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: roleName},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: resources, Verbs: []string{"get", "create"}}},
		}, metav1.CreateOptions{})
		must(t, err)
		_, err = cn.admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: roleName},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: roleName},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: cn.ns}},
		}, metav1.CreateOptions{})
		must(t, err)
		t.Cleanup(func() {
			_ = cn.admin.RbacV1().ClusterRoleBindings().Delete(context.Background(), roleName, metav1.DeleteOptions{})
			_ = cn.admin.RbacV1().ClusterRoles().Delete(context.Background(), roleName, metav1.DeleteOptions{})
		})
		// Skiff caches denials for 30 s: ask only once RBAC allows.
		waitFor(t, 30*time.Second, "RBAC to allow "+user, func() (bool, error) {
			sar, err := cn.admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
				Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{
					Verb: "get", Resource: "nodes", Subresource: subresources[0], Name: nodeName,
				}},
			}, metav1.CreateOptions{})
			return err == nil && sar.Status.Allowed, nil
		})
	}
	tr, err := cn.admin.CoreV1().ServiceAccounts(cn.ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	must(t, err)
	return user, tr.Status.Token
}

// The kubelet API on its port: TLS with a self-signed serving
// certificate under <root-dir>/pki, 401 without credentials, 403 (with
// upstream's message) for a ServiceAccount without nodes/proxy, the
// fine-grained subresources and their proxy fallback, and the
// apiserver's kubelet client certificate; the debug endpoints through
// kubectl.
func TestKubeletAPIAuth(t *testing.T) {
	cn := sharedNode(t)
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)

	// The self-signed serving certificate is what the port presents. (The
	// Node may still be Ready from an earlier test: wait for this Skiff.)
	certFile := filepath.Join(cn.root, "pki", "kubelet.crt")
	waitFor(t, 30*time.Second, "the kubelet API serving", func() (bool, error) {
		if _, err := os.Stat(certFile); err != nil {
			return false, nil
		}
		c, err := tls.Dial("tcp", strings.TrimPrefix(cn.kubeletURL(t, ""), "https://"), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			return false, nil
		}
		return true, c.Close()
	})
	served := readCert(t, certFile)
	conn, err := tls.Dial("tcp", strings.TrimPrefix(cn.kubeletURL(t, ""), "https://"), &tls.Config{InsecureSkipVerify: true})
	must(t, err)
	if peer := conn.ConnectionState().PeerCertificates[0]; !peer.Equal(served) {
		t.Errorf("the port serves %s, not %s", peer.Subject, certFile)
	}
	conn.Close()

	t.Run("no credentials: 401", func(t *testing.T) {
		for _, p := range []string{"/pods", "/stats/summary", "/configz", "/healthz", "/exec/default/p/c?command=ls&stdout=1", "/debug/pprof/"} {
			if code, body := kubeletGet(t, cn.kubeletURL(t, p), "", nil); code != http.StatusUnauthorized || body != "Unauthorized\n" {
				t.Errorf("%s: %d %q, want 401 Unauthorized", p, code, body)
			}
		}
	})

	t.Run("ServiceAccount without nodes/proxy: 403", func(t *testing.T) {
		user, token := cn.serviceAccountToken(t, "no-rights")
		code, body := kubeletGet(t, cn.kubeletURL(t, "/pods"), token, nil)
		want := fmt.Sprintf("Forbidden (user=%s, verb=get, resource=nodes, subresource(s)=[pods proxy])\n", user)
		if code != http.StatusForbidden || body != want {
			t.Errorf("/pods: %d %q, want 403 %q", code, body, want)
		}
		code, body = kubeletGet(t, cn.kubeletURL(t, "/stats/summary"), token, nil)
		want = fmt.Sprintf("Forbidden (user=%s, verb=get, resource=nodes, subresource(s)=[stats])\n", user)
		if code != http.StatusForbidden || body != want {
			t.Errorf("/stats/summary: %d %q, want 403 %q", code, body, want)
		}
	})

	t.Run("nodes/stats only: stats yes, pods no", func(t *testing.T) {
		_, token := cn.serviceAccountToken(t, "stats-reader", "stats")
		if code, body := kubeletGet(t, cn.kubeletURL(t, "/stats/summary"), token, nil); code != http.StatusOK || !strings.Contains(body, `"nodeName":"`+nodeName+`"`) {
			t.Errorf("/stats/summary: %d %s", code, tail(body, 3))
		}
		if code, _ := kubeletGet(t, cn.kubeletURL(t, "/pods"), token, nil); code != http.StatusForbidden {
			t.Errorf("/pods: %d, want 403", code)
		}
	})

	t.Run("nodes/proxy: everything", func(t *testing.T) {
		_, token := cn.serviceAccountToken(t, "proxier", "proxy")
		for _, p := range []string{"/pods", "/configz", "/healthz", "/runningpods/"} {
			if code, body := kubeletGet(t, cn.kubeletURL(t, p), token, nil); code != http.StatusOK {
				t.Errorf("%s: %d %s", p, code, body)
			}
		}
		// Not a metrics or stats path: proxy does not cover those.
		if code, _ := kubeletGet(t, cn.kubeletURL(t, "/metrics"), token, nil); code != http.StatusForbidden {
			t.Errorf("/metrics: %d, want 403", code)
		}
	})

	t.Run("apiserver's kubelet client certificate", func(t *testing.T) {
		pki := filepath.Join(cn.c.Dir(), "pki")
		cert, err := tls.LoadX509KeyPair(filepath.Join(pki, "apiserver-kubelet-client.crt"), filepath.Join(pki, "apiserver-kubelet-client.key"))
		must(t, err)
		code, body := kubeletGet(t, cn.kubeletURL(t, "/configz"), "", &cert)
		if code != http.StatusOK {
			t.Fatalf("/configz: %d %s", code, body)
		}
		var cz struct {
			Kubeletconfig struct {
				Port           int32 `json:"port"`
				Authentication struct {
					X509 struct {
						ClientCAFile string `json:"clientCAFile"`
					} `json:"x509"`
				} `json:"authentication"`
			} `json:"kubeletconfig"`
		}
		must(t, json.Unmarshal([]byte(body), &cz))
		if cz.Kubeletconfig.Port != int32(cn.apiPort) || cz.Kubeletconfig.Authentication.X509.ClientCAFile != cn.c.CAFile() {
			t.Errorf("/configz: %s", body)
		}
	})

	// Upstream's debug endpoints, through the apiserver's node proxy with
	// the real kubectl, as an admin profiling a node would reach them.
	t.Run("debug endpoints through kubectl", func(t *testing.T) {
		out, err := kubectl(cn.c, "get", "--raw", "/api/v1/nodes/"+nodeName+"/proxy/debug/pprof/heap?debug=1").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "heap profile:") || !strings.Contains(string(out), "runtime.MemStats") {
			t.Errorf("pprof heap: %v: %s", err, tail(string(out), 5))
		}
		v := filepath.Join(t.TempDir(), "v")
		must(t, os.WriteFile(v, []byte("3"), 0o644))
		out, err = kubectl(cn.c, "replace", "--raw", "/api/v1/nodes/"+nodeName+"/proxy/debug/flags/v", "-f", v).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "verbosity to 3") {
			t.Errorf("PUT /debug/flags/v: %v: %s", err, out)
		}
		// Back to the shared node's --v 2.
		must(t, os.WriteFile(v, []byte("2"), 0o644))
		if out, err := kubectl(cn.c, "replace", "--raw", "/api/v1/nodes/"+nodeName+"/proxy/debug/flags/v", "-f", v).CombinedOutput(); err != nil {
			t.Errorf("PUT /debug/flags/v back to 2: %v: %s", err, out)
		}
		_, token := cn.serviceAccountToken(t, "stats-only", "stats")
		if code, _ := kubeletGet(t, cn.kubeletURL(t, "/debug/pprof/"), token, nil); code != http.StatusForbidden {
			t.Errorf("/debug/pprof/ with nodes/stats only: %d, want 403", code)
		}
	})

	t.Run("healthz port", func(t *testing.T) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", cn.healthzPort))
		must(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(b) != "ok" {
			t.Errorf("healthz port: %d %q", resp.StatusCode, b)
		}
	})
}

// kubectl runs the real kubectl as the cluster's admin.
func kubectl(c *cluster.Cluster, args ...string) *exec.Cmd {
	return exec.Command(kubectlPath(), append([]string{"--kubeconfig", c.AdminKubeconfig()}, args...)...)
}

func kubectlPath() string {
	bin, err := filepath.Abs("../../_output/bin/kubectl")
	if err != nil {
		panic(err)
	}
	return bin
}

// kubectl exec, attach and port-forward through the apiserver
// to Skiff (the apiserver dials the node's InternalIP with its kubelet
// client certificate), and the node proxy's stats, metrics and configz.
func TestKubectlThroughKubeletAPI(t *testing.T) {
	cn := sharedNode(t)
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)

	web := busyboxPod("web", "mkdir -p /www && echo hello-from-skiff > /www/index.html && httpd -p 8080 -h /www && "+sleeper)
	cn.createPod(t, web)
	talk := busyboxPod("talk", "while read line; do echo got:$line; done; "+sleeper)
	talk.Spec.Containers[0].Stdin = true
	cn.createPod(t, talk)
	for _, name := range []string{"web", "talk"} {
		cn.waitPod(t, cn.ns, name, 60*time.Second, "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	}

	t.Run("exec exit code and streams", func(t *testing.T) {
		cmd := kubectl(cn.c, "-n", cn.ns, "exec", "web", "-c", "main", "--", "sh", "-c", "echo to-stdout; echo to-stderr >&2; exit 3")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 3 {
			t.Errorf("kubectl exec: %v (want exit status 3); stderr %q", err, stderr.String())
		}
		if stdout.String() != "to-stdout\n" || !strings.Contains(stderr.String(), "to-stderr") {
			t.Errorf("stdout %q stderr %q", stdout.String(), stderr.String())
		}
	})

	t.Run("exec -i with stdin", func(t *testing.T) {
		cmd := kubectl(cn.c, "-n", cn.ns, "exec", "-i", "web", "--", "sh", "-c", "tr a-z A-Z; echo done")
		cmd.Stdin = strings.NewReader("piped through skiff\n")
		out, err := cmd.CombinedOutput()
		if err != nil || string(out) != "PIPED THROUGH SKIFF\ndone\n" {
			t.Errorf("kubectl exec -i: %v: %q", err, out)
		}
	})

	t.Run("exec -it with a terminal", func(t *testing.T) {
		// script(1) gives kubectl a pseudo-terminal, as a user's shell.
		kc := kubectl(cn.c, "-n", cn.ns, "exec", "-it", "web", "--", "sh", "-c", "tty; stty size >/dev/null && echo has-tty; exit 7")
		cmd := exec.Command("script", "-qec", shellQuote(kc.Args), "/dev/null")
		cmd.Stdin = strings.NewReader("")
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 7 {
			t.Errorf("kubectl exec -it: %v (want exit status 7): %q", err, out)
		}
		if !regexp.MustCompile(`/dev/pts/\d+`).Match(out) || !strings.Contains(string(out), "has-tty") {
			t.Errorf("kubectl exec -it ran without a terminal: %q", out)
		}
	})

	t.Run("attach", func(t *testing.T) {
		line, _ := converse(t, cn.c, "hello-attach", "got:", "-n", cn.ns, "attach", "-i", "talk", "-c", "main")
		if line != "got:hello-attach" {
			t.Errorf("attach echoed %q", line)
		}
	})

	t.Run("port-forward", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		pf := kubectl(cn.c, "-n", cn.ns, "port-forward", "pod/web", ":8080")
		cmd := exec.CommandContext(ctx, pf.Path, pf.Args[1:]...)
		stdout, err := cmd.StdoutPipe()
		must(t, err)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		must(t, cmd.Start())
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		re := regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> 8080`)
		sc := bufio.NewScanner(stdout)
		var port string
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				port = m[1]
				break
			}
		}
		if port == "" {
			t.Fatalf("kubectl port-forward printed no local port; stderr %q", stderr.String())
		}
		go func() { _, _ = io.Copy(io.Discard, stdout) }()
		for i := 0; i < 3; i++ { // one connection after another over the same session
			resp, err := http.Get("http://127.0.0.1:" + port + "/index.html")
			must(t, err)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(b) != "hello-from-skiff\n" {
				t.Errorf("through port-forward: %d %q; kubectl stderr %q", resp.StatusCode, b, stderr.String())
			}
		}
	})

	t.Run("node proxy", func(t *testing.T) {
		raw := func(path string) []byte {
			out, err := kubectl(cn.c, "get", "--raw", "/api/v1/nodes/"+nodeName+"/proxy"+path).Output()
			if err != nil {
				t.Fatalf("kubectl get --raw %s: %v", path, err)
			}
			return out
		}
		var summary struct {
			Node struct {
				NodeName string `json:"nodeName"`
				Memory   struct {
					WorkingSetBytes *uint64 `json:"workingSetBytes"`
				} `json:"memory"`
			} `json:"node"`
			Pods []struct {
				PodRef struct{ Name, Namespace string } `json:"podRef"`
			} `json:"pods"`
		}
		// The pod shows once the stats sampler has seen it (every 10 s).
		var m string
		waitFor(t, 45*time.Second, "pod web in stats/summary and metrics/resource", func() (bool, error) {
			must(t, json.Unmarshal(raw("/stats/summary"), &summary))
			found := false
			for _, p := range summary.Pods {
				found = found || (p.PodRef.Namespace == cn.ns && p.PodRef.Name == "web")
			}
			m = string(raw("/metrics/resource"))
			return found && strings.Contains(m, fmt.Sprintf(`container_memory_working_set_bytes{container="main",namespace=%q,pod="web"}`, cn.ns)), nil
		})
		if summary.Node.NodeName != nodeName || summary.Node.Memory.WorkingSetBytes == nil || *summary.Node.Memory.WorkingSetBytes == 0 {
			t.Errorf("stats/summary node: %+v", summary.Node)
		}
		if !strings.Contains(m, "node_cpu_usage_seconds_total") {
			t.Errorf("metrics/resource:\n%s", tail(m, 20))
		}
		var cz struct {
			Kubeletconfig map[string]any `json:"kubeletconfig"`
		}
		must(t, json.Unmarshal(raw("/configz"), &cz))
		if cz.Kubeletconfig["port"] != float64(cn.apiPort) || cz.Kubeletconfig["readOnlyPort"] != float64(cn.port) {
			t.Errorf("configz port %v readOnlyPort %v, want %d and %d", cz.Kubeletconfig["port"], cz.Kubeletconfig["readOnlyPort"], cn.apiPort, cn.port)
		}
	})
}

// converse runs kubectl with args, its stdin held open, and says say every
// second until a line of its stdout starts with prefix (the session may
// not be up when the first line goes). It returns that line and the
// still-open stdin; kubectl is killed when the test ends.
func converse(t *testing.T, c *cluster.Cluster, say, prefix string, args ...string) (string, io.WriteCloser) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	kc := kubectl(c, args...)
	cmd := exec.CommandContext(ctx, kc.Path, kc.Args[1:]...)
	stdin, err := cmd.StdinPipe()
	must(t, err)
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	cmd.Stderr = io.Discard
	must(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); cancel() })
	got := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), prefix) {
				got <- sc.Text()
				return
			}
		}
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if _, err := io.WriteString(stdin, say+"\n"); err != nil {
			t.Fatalf("write to kubectl %s: %v", args, err)
		}
		select {
		case line := <-got:
			return line, stdin
		case <-ctx.Done():
			t.Fatalf("no answer through kubectl %s", args)
		case <-tick.C:
		}
	}
}

// shellQuote joins args for sh -c.
func shellQuote(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}
