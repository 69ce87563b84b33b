package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

type fakeHost struct {
	pods []*v1.Pod
}

func (h *fakeHost) Pods() []*v1.Pod { return h.pods }
func (h *fakeHost) Healthy() error  { return nil }
func (h *fakeHost) Pod(ns, name string, uid types.UID) (*v1.Pod, bool) {
	for _, p := range h.pods {
		if p.Namespace == ns && p.Name == name && (uid == "" || uid == p.UID) {
			return p, true
		}
	}
	return nil, false
}
func (h *fakeHost) RunningPods(context.Context) ([]*v1.Pod, error) { return h.pods[:1], nil }
func (h *fakeHost) ContainerID(_ context.Context, p *v1.Pod, c string) (string, error) {
	if c == "gone" {
		return "", fmt.Errorf("container %q: %w", c, ErrNotFound)
	}
	return "cid-" + string(p.UID) + "-" + c, nil
}
func (h *fakeHost) SandboxID(_ context.Context, p *v1.Pod) (string, error) {
	return "sandbox-" + string(p.UID), nil
}

// fakeRuntime answers the streaming calls with the URL of a streaming
// server that takes any upgrade and echoes what it gets.
type fakeRuntime struct {
	url string
	err error

	mu       sync.Mutex
	exec     *runtimeapi.ExecRequest
	attach   *runtimeapi.AttachRequest
	forward  *runtimeapi.PortForwardRequest
	execSync []string
}

func (f *fakeRuntime) Exec(_ context.Context, r *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.exec = r
	return &runtimeapi.ExecResponse{Url: f.url + "/exec/token1"}, f.err
}
func (f *fakeRuntime) Attach(_ context.Context, r *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attach = r
	return &runtimeapi.AttachResponse{Url: f.url + "/attach/token2"}, f.err
}
func (f *fakeRuntime) PortForward(_ context.Context, r *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forward = r
	return &runtimeapi.PortForwardResponse{Url: f.url + "/portforward/token3"}, f.err
}
func (f *fakeRuntime) ExecSync(_ context.Context, id string, cmd []string, _ time.Duration) ([]byte, []byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.execSync = append([]string{id}, cmd...)
	return []byte("out\n"), []byte("err\n"), f.err
}

// streamingServer takes an upgrade on any path, tells the path, then
// echoes.
func streamingServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.Header.Get("Connection"), "Upgrade") {
			http.Error(w, "upgrade required", 400)
			return
		}
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprintf(rw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n%s\n", r.Header.Get("Upgrade"), r.URL.Path)
		rw.Flush()
		_, _ = io.Copy(conn, rw)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func testPods() []*v1.Pod {
	return []*v1.Pod{{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns1", UID: "uid-1"},
		Spec: v1.PodSpec{
			Containers:     []v1.Container{{Name: "main", TTY: true}, {Name: "gone"}},
			InitContainers: []v1.Container{{Name: "init"}},
		},
	}}
}

func testServer(t *testing.T, debugging bool) (*httptest.Server, *fakeRuntime) {
	t.Helper()
	rt := &fakeRuntime{url: streamingServer(t).URL}
	a, err := NewAuth(AuthConfig{
		NodeName: "node-1",
		Authentication: kubeletconfig.KubeletAuthentication{
			Anonymous: kubeletconfig.KubeletAnonymousAuthentication{Enabled: ptr.To(true)},
			Webhook:   kubeletconfig.KubeletWebhookAuthentication{Enabled: ptr.To(false)},
		},
		Authorization: kubeletconfig.KubeletAuthorization{Mode: kubeletconfig.KubeletAuthorizationModeAlwaysAllow},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &kubeletconfig.KubeletConfiguration{
		TypeMeta: metav1.TypeMeta{Kind: "KubeletConfiguration", APIVersion: "kubelet.config.k8s.io/v1beta1"},
		Port:     10250, Address: "0.0.0.0",
	}
	sc := SecureConfig{Auth: a, Host: &fakeHost{pods: testPods()}, Runtime: rt, Stats: &fakeStats{}, Config: cfg, Debugging: debugging,
		ContainerLogs: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "logs of %s", r.PathValue("container"))
		})}
	srv := httptest.NewServer(a.Filter(secureMux(sc)))
	t.Cleanup(srv.Close)
	return srv, rt
}

// upgrade sends an upgrade request on a raw connection and returns the
// status line, the first line the stream carries, and the connection.
func upgrade(t *testing.T, srv *httptest.Server, method, path, protocol string) (string, string, net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: %s\r\nContent-Length: 0\r\n\r\n", method, path, protocol)
	br := bufio.NewReader(conn)
	status, err := br.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(status, "101") {
		return strings.TrimSpace(status), "", conn, br
	}
	for { // headers
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if l == "\r\n" {
			break
		}
	}
	first, _ := br.ReadString('\n')
	return strings.TrimSpace(status), strings.TrimSpace(first), conn, br
}

func TestStreamingProxies(t *testing.T) {
	srv, rt := testServer(t, true)

	status, first, conn, br := upgrade(t, srv, "POST", "/exec/ns1/web/main?command=sh&command=-c&command=echo+hi&input=1&output=1&tty=1", "SPDY/3.1")
	if !strings.Contains(status, "101") || first != "/exec/token1" {
		t.Fatalf("exec: %q, stream opened on %q", status, first)
	}
	fmt.Fprint(conn, "ping\n")
	if echo, _ := br.ReadString('\n'); echo != "ping\n" {
		t.Errorf("through the proxy: %q", echo)
	}
	want := &runtimeapi.ExecRequest{ContainerId: "cid-uid-1-main", Cmd: []string{"sh", "-c", "echo hi"}, Tty: true, Stdin: true, Stdout: true}
	if rt.exec.String() != want.String() {
		t.Errorf("exec request %v, want %v", rt.exec, want)
	}

	// Attach follows the container spec's TTY, whatever the request says.
	status, first, _, _ = upgrade(t, srv, "GET", "/attach/ns1/web/uid-1/main?output=1&error=1", "websocket")
	if !strings.Contains(status, "101") || first != "/attach/token2" {
		t.Fatalf("attach: %q, %q", status, first)
	}
	wantAttach := &runtimeapi.AttachRequest{ContainerId: "cid-uid-1-main", Tty: true, Stdout: true, Stderr: true}
	if rt.attach.String() != wantAttach.String() {
		t.Errorf("attach request %v, want %v", rt.attach, wantAttach)
	}

	status, first, _, _ = upgrade(t, srv, "POST", "/portForward/ns1/web", "SPDY/3.1")
	if !strings.Contains(status, "101") || first != "/portforward/token3" || rt.forward.PodSandboxId != "sandbox-uid-1" || len(rt.forward.Port) != 0 {
		t.Errorf("portForward: %q, %q, %v", status, first, rt.forward)
	}
}

func TestStreamingErrors(t *testing.T) {
	srv, rt := testServer(t, true)
	for _, tc := range []struct {
		method, path string
		code         int
		body         string
	}{
		{"POST", "/exec/ns1/nope/main?command=ls&output=1", 404, "pod does not exist"},
		{"POST", "/exec/ns1/web/uid-2/main?command=ls&output=1", 404, "pod does not exist"},
		{"POST", "/exec/ns1/web/gone?command=ls&output=1", 404, `container "gone": not found`},
		{"POST", "/exec/ns1/web/main?command=ls", 400, "you must specify at least 1 of stdin, stdout, stderr"},
		{"POST", "/exec/NS_1/web/main?command=ls&output=1", 400, `invalid namespace "NS_1"`},
		{"POST", "/exec/ns1/web..x/main?command=ls&output=1", 400, `invalid pod name "web..x"`},
		{"POST", "/exec/ns1/web/Main?command=ls&output=1", 400, `invalid container name "Main"`},
		{"POST", "/exec/ns1/web/u%20id/main?command=ls&output=1", 400, `invalid pod UID "u id"`},
		{"GET", "/attach/ns1/web/other?output=1", 404, "container other not found in pod ns1/web"},
		{"POST", "/exec/ns1/web/main?command=ls&output=1", 400, "Upgrade request required"},
		{"PUT", "/exec/ns1/web/main?command=ls&output=1", 405, ""},
		{"GET", "/run/ns1/web/main?cmd=ls", 405, ""},
		{"POST", "/run/ns1/web/main", 400, "missing cmd"},
		{"GET", "/containerLogs/ns1/web/main", 200, "logs of main"},
		{"GET", "/containerLogs/ns1/web/Bad", 400, `invalid container name "Bad"`},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || !strings.Contains(string(b), tc.body) {
			t.Errorf("%s %s: %d %q, want %d %q", tc.method, tc.path, resp.StatusCode, b, tc.code, tc.body)
		}
	}

	rt.err = grpcstatus.Error(codes.NotFound, "container is not running")
	status, _, _, _ := upgrade(t, srv, "POST", "/exec/ns1/web/main?command=ls&output=1", "SPDY/3.1")
	if !strings.Contains(status, "404") {
		t.Errorf("runtime NotFound: %q, want 404", status)
	}
	rt.err = grpcstatus.Error(codes.ResourceExhausted, "maximum number of in-flight requests exceeded")
	status, _, _, _ = upgrade(t, srv, "POST", "/exec/ns1/web/main?command=ls&output=1", "SPDY/3.1")
	if !strings.Contains(status, "429") {
		t.Errorf("runtime ResourceExhausted: %q, want 429", status)
	}
}

func TestRun(t *testing.T) {
	srv, rt := testServer(t, true)
	resp, err := http.PostForm(srv.URL+"/run/ns1/web/uid-1/main", map[string][]string{"cmd": {"cat /etc/hostname"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "out\nerr\n" {
		t.Errorf("run: %d %q", resp.StatusCode, b)
	}
	if strings.Join(rt.execSync, " ") != "cid-uid-1-main cat /etc/hostname" {
		t.Errorf("ExecSync %q", rt.execSync)
	}
	rt.err = fmt.Errorf("command 'false' exited with 1")
	resp, err = http.Post(srv.URL+"/run/ns1/web/main?cmd=false", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 500 {
		t.Errorf("failed command: %d, want 500", resp.StatusCode)
	}
}

func TestDebuggingHandlersDisabled(t *testing.T) {
	srv, rt := testServer(t, false)
	for _, p := range []string{"/exec/ns1/web/main?command=ls&output=1", "/attach/ns1/web/main", "/portForward/ns1/web", "/run/ns1/web/main?cmd=ls", "/containerLogs/ns1/web/main", "/runningpods/", "/logs/"} {
		resp, err := http.Post(srv.URL+p, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 405 || string(b) != "Debug endpoints are disabled.\n" {
			t.Errorf("%s: %d %q", p, resp.StatusCode, b)
		}
	}
	if rt.exec != nil || rt.execSync != nil {
		t.Error("the runtime was called")
	}
	// The rest still serves.
	if resp, err := http.Get(srv.URL + "/pods"); err != nil || resp.StatusCode != 200 {
		t.Errorf("/pods: %v %v", resp, err)
	}
}

func TestSecureEndpoints(t *testing.T) {
	srv, _ := testServer(t, true)
	get := func(path string) (int, []byte) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	code, b := get("/configz")
	var cz map[string]map[string]any
	if err := json.Unmarshal(b, &cz); code != 200 || err != nil {
		t.Fatalf("/configz: %d %v %s", code, err, b)
	}
	if kc := cz["kubeletconfig"]; kc["port"] != float64(10250) || kc["address"] != "0.0.0.0" || kc["kind"] != nil {
		t.Errorf("/configz: %s", b)
	}
	for path, want := range map[string]string{
		"/healthz": "ok", "/healthz/ping": "ok", "/healthz/log": "ok", "/healthz/syncloop": "ok",
		"/stats/summary": `"nodeName":"n1"`, "/metrics/resource": "resource",
	} {
		if code, b := get(path); code != 200 || !strings.Contains(string(b), want) {
			t.Errorf("%s: %d %q", path, code, b)
		}
	}
	for _, path := range []string{"/pods", "/runningpods/"} {
		code, b := get(path)
		var list v1.PodList
		if err := json.Unmarshal(b, &list); code != 200 || err != nil || len(list.Items) != 1 || list.Items[0].Name != "web" {
			t.Errorf("%s: %d %v %s", path, code, err, b)
		}
	}
	if code, b := get("/metrics"); code != 200 || !strings.Contains(string(b), "go_goroutines") {
		t.Errorf("/metrics: %d", code)
	}
	// No SystemLogs handler: enableSystemLogHandler is false.
	if code, b := get("/logs/"); code != 405 || string(b) != "logs endpoint is disabled.\n" {
		t.Errorf("/logs/ without a handler: %d %q", code, b)
	}
}
