package server

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/apimachinery/pkg/util/validation"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/kubelet/pkg/cri/streaming/portforward"
	"k8s.io/kubelet/pkg/cri/streaming/remotecommand"

	"github.com/skiff-sh/skiff/internal/logs"
	"github.com/skiff-sh/skiff/internal/podspec"
)

// ErrNotFound is what Host lookups wrap when a pod, container or sandbox
// is not there: the request gets a 404. It is the container-log Source's
// sentinel too, so one error serves both handlers.
var ErrNotFound = logs.ErrNotFound

// Runtime is the container runtime's part of exec, attach, port-forward
// and run: the CRI calls that return a streaming URL, and ExecSync.
type Runtime interface {
	Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error)
	Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error)
	PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error)
	ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (stdout, stderr []byte, err error)
}

// streamer serves /exec, /attach, /portForward and /run. The runtime
// serves the streams on its own streaming server (containerd's on
// 127.0.0.1); Skiff asks it for a one-time URL and proxies the upgraded
// connection there, as upstream does for every CRI runtime. SPDY and
// WebSocket upgrades pass through alike.
type streamer struct {
	host Host
	rt   Runtime
}

func (s *streamer) install(mux *http.ServeMux) {
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		for _, p := range []string{"{namespace}/{pod}/{container}", "{namespace}/{pod}/{uid}/{container}"} {
			mux.Handle(m+" /exec/"+p, validNames(http.HandlerFunc(s.exec)))
			mux.Handle(m+" /attach/"+p, validNames(http.HandlerFunc(s.attach)))
		}
		for _, p := range []string{"{namespace}/{pod}", "{namespace}/{pod}/{uid}"} {
			mux.Handle(m+" /portForward/"+p, validNames(http.HandlerFunc(s.portForward)))
		}
	}
	for _, p := range []string{"{namespace}/{pod}/{container}", "{namespace}/{pod}/{uid}/{container}"} {
		mux.Handle("POST /run/"+p, validNames(http.HandlerFunc(s.run)))
	}
}

// pod finds the request's pod, or answers 404.
func (s *streamer) pod(w http.ResponseWriter, r *http.Request) (*v1.Pod, bool) {
	pod, ok := s.host.Pod(r.PathValue("namespace"), r.PathValue("pod"), types.UID(r.PathValue("uid")))
	if !ok {
		http.Error(w, "pod does not exist", http.StatusNotFound)
	}
	return pod, ok
}

// containerID finds the request's container in the runtime, or answers.
func (s *streamer) containerID(w http.ResponseWriter, r *http.Request, pod *v1.Pod) (string, bool) {
	id, err := s.host.ContainerID(r.Context(), pod, r.PathValue("container"))
	if err != nil {
		writeLookupError(w, err)
		return "", false
	}
	return id, true
}

// writeLookupError answers a failed container or sandbox lookup: 404 for
// ErrNotFound, else 500.
func writeLookupError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	if errors.Is(err, ErrNotFound) {
		code = http.StatusNotFound
	}
	http.Error(w, err.Error(), code)
}

// lookupFunc finds the runtime ID a streaming request runs on: a
// container's (exec, attach) or the pod sandbox's (port-forward). An
// error wrapping ErrNotFound answers 404, any other 500.
type lookupFunc func(ctx context.Context, pod *v1.Pod) (string, error)

// urlFunc asks the runtime for the one-time streaming URL of a request on
// the runtime object id.
type urlFunc func(ctx context.Context, pod *v1.Pod, id string) (string, error)

// serveStream is every streaming request's path: find the pod (404), find
// the runtime object in it with lookup, ask the runtime for a streaming
// URL with call, and proxy the connection there.
func (s *streamer) serveStream(w http.ResponseWriter, r *http.Request, lookup lookupFunc, call urlFunc) {
	pod, ok := s.pod(w, r)
	if !ok {
		return
	}
	id, err := lookup(r.Context(), pod)
	if err != nil {
		writeLookupError(w, err)
		return
	}
	u, err := call(r.Context(), pod, id)
	if err != nil {
		writeRuntimeError(w, err)
		return
	}
	proxyStream(w, r, u)
}

// container is the lookup of the request's named container.
func (s *streamer) container(r *http.Request) lookupFunc {
	return func(ctx context.Context, pod *v1.Pod) (string, error) {
		return s.host.ContainerID(ctx, pod, r.PathValue("container"))
	}
}

func (s *streamer) exec(w http.ResponseWriter, r *http.Request) {
	opts, err := remotecommand.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.serveStream(w, r, s.container(r), func(ctx context.Context, _ *v1.Pod, id string) (string, error) {
		resp, err := s.rt.Exec(ctx, &runtimeapi.ExecRequest{
			ContainerId: id, Cmd: r.URL.Query()["command"],
			Tty: opts.TTY, Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr,
		})
		return resp.GetUrl(), err
	})
}

func (s *streamer) attach(w http.ResponseWriter, r *http.Request) {
	opts, err := remotecommand.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	name := r.PathValue("container")
	// The container must be in the pod's spec: whether its process has a
	// terminal was fixed when it started, so the attach follows the spec,
	// not the request.
	lookup := func(ctx context.Context, pod *v1.Pod) (string, error) {
		if podspec.Container(&pod.Spec, name) == nil {
			return "", logs.NotFound("container %s not found in pod %s/%s", name, pod.Namespace, pod.Name)
		}
		return s.host.ContainerID(ctx, pod, name)
	}
	s.serveStream(w, r, lookup, func(ctx context.Context, pod *v1.Pod, id string) (string, error) {
		resp, err := s.rt.Attach(ctx, &runtimeapi.AttachRequest{
			ContainerId: id, Tty: podspec.Container(&pod.Spec, name).TTY,
			Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr,
		})
		return resp.GetUrl(), err
	})
}

func (s *streamer) portForward(w http.ResponseWriter, r *http.Request) {
	// Ports come with the WebSocket request; SPDY clients name them per
	// stream, after the upgrade.
	opts, err := portforward.NewV4Options(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.serveStream(w, r, s.host.SandboxID, func(ctx context.Context, _ *v1.Pod, id string) (string, error) {
		resp, err := s.rt.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: id, Port: opts.Ports})
		return resp.GetUrl(), err
	})
}

// run runs the command in cmd (split at spaces, as upstream) and returns
// its output, stdout then stderr.
func (s *streamer) run(w http.ResponseWriter, r *http.Request) {
	cmd := strings.Fields(r.FormValue("cmd"))
	if len(cmd) == 0 {
		http.Error(w, "missing cmd", http.StatusBadRequest)
		return
	}
	pod, ok := s.pod(w, r)
	if !ok {
		return
	}
	id, ok := s.containerID(w, r, pod)
	if !ok {
		return
	}
	stdout, stderr, err := s.rt.ExecSync(r.Context(), id, cmd, 0)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	// Upstream labels the raw output JSON; clients read it as text.
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(stdout, stderr...))
}

// proxyStream proxies the upgraded connection to the runtime's streaming
// URL.
func proxyStream(w http.ResponseWriter, r *http.Request, rawURL string) {
	u, err := url.Parse(rawURL)
	if err != nil {
		http.Error(w, fmt.Sprintf("runtime returned an invalid streaming URL: %v", err), http.StatusInternalServerError)
		return
	}
	h := proxy.NewUpgradeAwareHandler(u, nil, false, true, responder{})
	h.ServeHTTP(w, r)
}

type responder struct{}

func (responder) Error(w http.ResponseWriter, _ *http.Request, err error) {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Code != 0 { // "Upgrade request required", say
		http.Error(w, err.Error(), int(status.Status().Code))
		return
	}
	klog.ErrorS(err, "Proxying a stream to the runtime failed")
	http.Error(w, err.Error(), http.StatusInternalServerError)
}

// writeRuntimeError answers a failed CRI streaming call: NotFound is 404,
// ResourceExhausted (too many pending streams) 429, anything else 500.
func writeRuntimeError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch grpcstatus.Code(err) {
	case codes.NotFound:
		code = http.StatusNotFound
	case codes.ResourceExhausted:
		w.Header().Set("Retry-After", "60")
		code = http.StatusTooManyRequests
	}
	http.Error(w, err.Error(), code)
}

// uidPattern admits API UIDs (UUIDs) and static pods' (hex hashes).
var uidPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// validNames answers 400 unless the request's path names are valid: the
// namespace and container as DNS labels, the pod as a DNS subdomain.
func validNames(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		check := func(what, v string, f func(string) []string) bool {
			if v == "" {
				return true // not in this route
			}
			if errs := f(v); len(errs) > 0 {
				http.Error(w, fmt.Sprintf("invalid %s %q: %s", what, v, strings.Join(errs, "; ")), http.StatusBadRequest)
				return false
			}
			return true
		}
		if !check("namespace", r.PathValue("namespace"), validation.IsDNS1123Label) ||
			!check("pod name", r.PathValue("pod"), validation.IsDNS1123Subdomain) ||
			!check("container name", r.PathValue("container"), validation.IsDNS1123Label) {
			return
		}
		if uid := r.PathValue("uid"); uid != "" && !uidPattern.MatchString(uid) {
			http.Error(w, fmt.Sprintf("invalid pod UID %q", uid), http.StatusBadRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// klogErrorLog sends net/http's own complaints (TLS handshake errors of
// probing clients, mostly) to klog at a verbosity where they stay quiet.
func klogErrorLog() *log.Logger { return log.New(klogWriter{}, "", 0) }

type klogWriter struct{}

func (klogWriter) Write(p []byte) (int, error) {
	klog.V(3).InfoS("HTTP server", "msg", strings.TrimSpace(string(p)))
	return len(p), nil
}
