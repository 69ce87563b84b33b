package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"

	"github.com/skiff-sh/skiff/internal/metrics"
)

// Host is what the kubelet API needs of the kubelet.
type Host interface {
	Provider
	// Pod is the wanted pod of that namespace and name (for a static pod
	// the pod itself, not its mirror pod). A non-empty uid must be the
	// pod's, or its mirror pod's.
	Pod(namespace, name string, uid types.UID) (*v1.Pod, bool)
	// RunningPods are the pods as the runtime holds them (/runningpods/).
	RunningPods(ctx context.Context) ([]*v1.Pod, error)
	// ContainerID is the runtime ID of the pod's named container: its
	// running instance, else its newest. An error wrapping ErrNotFound
	// when there is none.
	ContainerID(ctx context.Context, pod *v1.Pod, container string) (string, error)
	// SandboxID is the runtime ID of the pod's sandbox (its ready one,
	// else its newest); an error wrapping ErrNotFound when there is none.
	SandboxID(ctx context.Context, pod *v1.Pod) (string, error)
}

// SecureConfig configures the kubelet API (NewSecure).
type SecureConfig struct {
	Addr string // address:port
	TLS  *tls.Config
	Auth *Auth
	Host Host
	// Runtime serves exec, attach, port-forward and run.
	Runtime Runtime
	Stats   StatsProvider // may be nil
	// Config is the effective configuration /configz shows.
	Config *kubeletconfig.KubeletConfiguration
	// Debugging is enableDebuggingHandlers: without it exec, attach,
	// portForward, run, containerLogs and runningpods answer 405.
	Debugging bool
	// ContainerLogs serves GET /containerLogs/{ns}/{pod}/{container}
	// (logs.Handler); names in the path are validated before it.
	ContainerLogs http.Handler
	// SystemLogs serves GET /logs/ (SystemLogs); nil is
	// enableSystemLogHandler false.
	SystemLogs http.Handler
	// Debug is the /debug/ endpoints, served with Debugging only.
	Debug Debug
	// Metrics is what /metrics and /metrics/probes serve, and counts the
	// requests; nil: a registry of its own.
	Metrics *metrics.Registry
}

// Secure is the kubelet API: HTTPS on address:port, every request
// authenticated and authorized (Auth) before it is served.
type Secure struct {
	addr string
	srv  *http.Server
}

// NewSecure returns the kubelet API server.
func NewSecure(cfg SecureConfig) *Secure {
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New()
	}
	h := cfg.Metrics.InstrumentHandler(metrics.ServerReadWrite, cfg.Auth.Filter(secureMux(cfg)))
	srv := newHTTPServer(h, cfg.TLS, upstreamTimeouts)
	srv.ErrorLog = klogErrorLog()
	return &Secure{addr: cfg.Addr, srv: srv}
}

// Run serves until ctx ends.
func (s *Secure) Run(ctx context.Context) error {
	return serve(ctx, "kubelet API", s.addr, s.srv)
}

// secureMux has every endpoint of the kubelet API; Auth guards it.
func secureMux(cfg SecureConfig) *http.ServeMux {
	mux := http.NewServeMux()
	installCommon(mux, cfg.Host, cfg.Stats, cfg.Metrics)
	mux.HandleFunc("GET /configz", func(w http.ResponseWriter, r *http.Request) { writeConfigz(w, cfg.Config) })
	if !cfg.Debugging {
		disabled := disabledEndpoint("Debug endpoints are disabled.")
		for _, p := range []string{"/run/", "/exec/", "/attach/", "/portForward/", "/containerLogs/", "/runningpods/", "/logs/", pprofPath, "/debug/flags/v"} {
			mux.HandleFunc(p, disabled)
		}
		return mux
	}
	cfg.Debug.install(mux)
	mux.HandleFunc("GET /runningpods/", func(w http.ResponseWriter, r *http.Request) {
		pods, err := cfg.Host.RunningPods(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writePods(w, pods)
	})
	st := &streamer{host: cfg.Host, rt: cfg.Runtime}
	st.install(mux)

	if cfg.ContainerLogs != nil {
		mux.Handle("GET /containerLogs/{namespace}/{pod}/{container}", untilClientLeaves(validNames(cfg.ContainerLogs)))
	}
	if cfg.SystemLogs != nil {
		mux.Handle("GET /logs/", cfg.SystemLogs)
	} else {
		mux.HandleFunc("/logs/", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "logs endpoint is disabled.", http.StatusMethodNotAllowed)
		})
	}
	return mux
}

// writeConfigz writes the configuration as upstream's /configz does:
// {"kubeletconfig": {...}}, the v1beta1 fields without kind/apiVersion.
func writeConfigz(w http.ResponseWriter, c *kubeletconfig.KubeletConfiguration) {
	cfg := c.DeepCopy()
	cfg.TypeMeta = metav1.TypeMeta{}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(map[string]any{"kubeletconfig": cfg}); err != nil {
		klog.ErrorS(err, "Writing /configz failed")
	}
}
