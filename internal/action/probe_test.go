package action

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	remote "k8s.io/cri-client/pkg"
	utilexec "k8s.io/utils/exec"
)

func TestResolvePort(t *testing.T) {
	c := &v1.Container{Name: "c", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080}}}
	for _, tc := range []struct {
		port    intstr.IntOrString
		want    int
		wantErr bool
	}{
		{intstr.FromInt32(80), 80, false},
		{intstr.FromString("http"), 8080, false},
		{intstr.FromString("9090"), 9090, false},
		{intstr.FromString("grpc"), 0, true},
		{intstr.FromInt32(0), 0, true},
		{intstr.FromInt32(70000), 0, true},
	} {
		got, err := ResolvePort(tc.port, c)
		if (err != nil) != tc.wantErr || (!tc.wantErr && got != tc.want) {
			t.Errorf("ResolvePort(%s) = %d, %v; want %d (error %v)", tc.port.String(), got, err, tc.want, tc.wantErr)
		}
	}
}

func TestNewHTTPRequest(t *testing.T) {
	c := &v1.Container{Name: "c", Ports: []v1.ContainerPort{{Name: "web", ContainerPort: 8080}}}
	for _, tc := range []struct {
		name    string
		get     v1.HTTPGetAction
		url     string
		headers map[string]string // "" value: header absent
		host    string
	}{
		{
			name:    "defaults",
			get:     v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("web")},
			url:     "http://10.0.0.5:8080/healthz",
			headers: map[string]string{"User-Agent": "kube-probe/1.34", "Accept": "*/*"},
		},
		{
			name: "scheme host query and headers",
			get: v1.HTTPGetAction{Scheme: v1.URISchemeHTTPS, Host: "example.test", Path: "/a?b=c", Port: intstr.FromInt32(443),
				HTTPHeaders: []v1.HTTPHeader{{Name: "x-custom", Value: "1"}, {Name: "User-Agent", Value: "mine"}, {Name: "Accept", Value: ""}, {Name: "Host", Value: "virtual"}}},
			url:     "https://example.test:443/a?b=c",
			headers: map[string]string{"X-Custom": "1", "User-Agent": "mine", "Accept": ""},
			host:    "virtual",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := NewHTTPRequest(context.Background(), &tc.get, c, "10.0.0.5", "probe")
			if err != nil {
				t.Fatal(err)
			}
			if req.URL.String() != tc.url {
				t.Errorf("URL = %s, want %s", req.URL, tc.url)
			}
			for k, v := range tc.headers {
				if got := req.Header.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			if req.Host != tc.host {
				t.Errorf("Host = %q, want %q", req.Host, tc.host)
			}
		})
	}
	if _, err := NewHTTPRequest(context.Background(), &v1.HTTPGetAction{Port: intstr.FromString("nope")}, c, "10.0.0.5", "probe"); err == nil {
		t.Error("an unknown port name must be an error")
	}
}

func TestHTTPProbe(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer other.Close()
	var gotUA string
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { gotUA = r.UserAgent(); fmt.Fprint(w, "fine") })
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "secret body", http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/local", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusFound) })
	mux.HandleFunc("/localfail", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/fail", http.StatusFound) })
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		// Another host name for the same test server: not followed.
		http.Redirect(w, r, strings.Replace(other.URL, "127.0.0.1", "localhost", 1)+"/", http.StatusFound)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) { time.Sleep(2 * time.Second) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	_, portStr, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	port, _ := strconv.Atoi(portStr)
	c := &v1.Container{Name: "c"}
	p := NewHTTPProber()
	for _, tc := range []struct {
		path   string
		want   Result
		output string
	}{
		{"/ok", Success, "fine"},
		{"/fail", Failure, "HTTP probe failed with statuscode: 503"},
		{"/local", Success, "fine"},
		{"/localfail", Failure, "HTTP probe failed with statuscode: 503"},
		{"/away", Warning, "Probe terminated redirects"},
		{"/slow", Failure, "Client.Timeout exceeded"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			req, err := NewHTTPRequest(context.Background(), &v1.HTTPGetAction{Path: tc.path, Port: intstr.FromInt32(int32(port))}, c, "127.0.0.1", "probe")
			if err != nil {
				t.Fatal(err)
			}
			got, out, err := p.Probe(req, 500*time.Millisecond)
			if err != nil || got != tc.want || !strings.Contains(out, tc.output) {
				t.Errorf("Probe(%s) = %v, %q, %v; want %v with %q", tc.path, got, out, err, tc.want, tc.output)
			}
		})
	}
	if gotUA != "kube-probe/1.34" {
		t.Errorf("User-Agent = %q", gotUA)
	}
}

func TestTCP(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if got, out, _ := TCP(context.Background(), "127.0.0.1", port, time.Second); got != Success {
		t.Errorf("TCP to a listener = %v %q, want success", got, out)
	}
	l.Close()
	if got, out, _ := TCP(context.Background(), "127.0.0.1", port, time.Second); got != Failure || !strings.Contains(out, "refused") {
		t.Errorf("TCP to a closed port = %v %q, want failure: refused", got, out)
	}
}

func TestGRPC(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("down", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()
	port := l.Addr().(*net.TCPAddr).Port

	bare := grpc.NewServer() // no health service
	lb, _ := net.Listen("tcp", "127.0.0.1:0")
	go func() { _ = bare.Serve(lb) }()
	defer bare.Stop()

	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()

	for _, tc := range []struct {
		name, service string
		port          int
		want          Result
		output        string
	}{
		{"serving", "", port, Success, "service healthy"},
		{"not serving", "down", port, Failure, `service unhealthy (responded with "NOT_SERVING")`},
		{"unknown service", "nope", port, Failure, "error: health rpc probe failed"},
		{"no health service", "", lb.Addr().(*net.TCPAddr).Port, Failure, "does not implement the grpc health protocol"},
		{"nothing listening", "", closedPort, Failure, "timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, out, err := GRPC(context.Background(), "127.0.0.1", tc.port, tc.service, 500*time.Millisecond)
			if err != nil || got != tc.want || !strings.Contains(out, tc.output) {
				t.Errorf("GRPC = %v, %q, %v; want %v with %q", got, out, err, tc.want, tc.output)
			}
		})
	}
}

type fakeExec struct {
	stdout, stderr string
	err            error
	gotTimeout     time.Duration
}

func (f *fakeExec) ExecSync(_ context.Context, _ string, _ []string, timeout time.Duration) ([]byte, []byte, error) {
	f.gotTimeout = timeout
	return []byte(f.stdout), []byte(f.stderr), f.err
}

func TestExec(t *testing.T) {
	cmd := []string{"sh", "-c", "check"}
	for _, tc := range []struct {
		name    string
		fake    fakeExec
		want    Result
		output  string
		wantErr bool
	}{
		{"exit 0", fakeExec{stdout: "ok"}, Success, "ok", false},
		{"exit 1", fakeExec{stdout: "out ", stderr: "bad", err: utilexec.CodeExitError{Err: errors.New("exited 1"), Code: 1}}, Failure, "out bad", false},
		{"timed out", fakeExec{err: fmt.Errorf("%w: after 1s", remote.ErrCommandTimedOut)}, Failure, `command "sh -c check" timed out`, false},
		{"deadline", fakeExec{err: status.Error(codes.DeadlineExceeded, "late")}, Failure, `command "sh -c check" timed out`, false},
		{"runtime error", fakeExec{err: status.Error(codes.NotFound, "no such container")}, Unknown, "", true},
		{"long output", fakeExec{stdout: strings.Repeat("x", 20000)}, Success, strings.Repeat("x", maxOutput), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, out, err := Exec(context.Background(), &tc.fake, "id", cmd, 3*time.Second)
			if got != tc.want || out != tc.output || (err != nil) != tc.wantErr {
				t.Errorf("Exec = %v, %.40q, %v; want %v, %.40q (error %v)", got, out, err, tc.want, tc.output, tc.wantErr)
			}
			if tc.fake.gotTimeout != 3*time.Second {
				t.Errorf("ExecSync timeout = %v", tc.fake.gotTimeout)
			}
		})
	}
}
