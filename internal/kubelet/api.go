package kubelet

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/logs"
	"github.com/skiff-sh/skiff/internal/server"
)

// startServers starts the read-only API, the healthz port and
// the kubelet API (HTTPS, authenticated) as the configuration asks. A
// server that cannot serve stops Skiff, as upstream.
func (k *Kubelet) startServers(spawn func(func(context.Context)), cancel context.CancelFunc) error {
	kc := k.cfg.Kubelet
	run := func(name string, f func(context.Context) error) {
		spawn(func(ctx context.Context) {
			if err := f(ctx); err != nil {
				klog.ErrorS(err, "Server stopped", "server", name)
				cancel()
			}
		})
	}
	if kc.ReadOnlyPort > 0 {
		// On `address`, as upstream, like the kubelet API.
		run("read-only", server.NewReadOnly(net.JoinHostPort(kc.Address, strconv.Itoa(int(kc.ReadOnlyPort))), k, k.stats, k.cfg.Metrics).Run)
	}
	if kc.HealthzPort != nil && *kc.HealthzPort > 0 {
		run("healthz", server.NewHealthz(net.JoinHostPort(kc.HealthzBindAddress, strconv.Itoa(int(*kc.HealthzPort)))).Run)
	}
	if !ptr.Deref(kc.EnableServer, true) {
		return nil
	}
	ac := server.AuthConfig{NodeName: k.cfg.NodeName, Authentication: kc.Authentication, Authorization: kc.Authorization}
	tc := server.TLSConfig{
		CertFile: kc.TLSCertFile, KeyFile: kc.TLSPrivateKeyFile,
		CertDir: certDir(k.cfg), Host: k.cfg.NodeName,
		MinVersion: kc.TLSMinVersion, CipherSuites: kc.TLSCipherSuites,
		ClientCAFile: kc.Authentication.X509.ClientCAFile,
	}
	if err := k.cluster.serverAuth(&ac, &tc, kc.ServerTLSBootstrap); err != nil {
		return err
	}
	auth, err := server.NewAuth(ac)
	if err != nil {
		return fmt.Errorf("kubelet API: %w", err)
	}
	tlsConfig, reload, err := server.NewTLS(tc)
	if err != nil {
		return fmt.Errorf("kubelet API: %w", err)
	}
	if reload != nil {
		spawn(reload)
	}
	spawn(auth.Run)
	run("kubelet API", server.NewSecure(server.SecureConfig{
		Addr:          net.JoinHostPort(kc.Address, strconv.Itoa(int(kc.Port))),
		TLS:           tlsConfig,
		Auth:          auth,
		Host:          k,
		Runtime:       k.cri.Runtime,
		Stats:         k.stats,
		Config:        kc,
		Debugging:     ptr.Deref(kc.EnableDebuggingHandlers, true),
		Metrics:       k.cfg.Metrics,
		ContainerLogs: logs.Handler(k),
		SystemLogs:    systemLogs(kc),
		Debug: server.Debug{
			Profiling:  ptr.Deref(kc.EnableProfilingHandler, true),
			Contention: kc.EnableContentionProfiling,
			Flags:      ptr.Deref(kc.EnableDebugFlagsHandler, true),
		},
	}).Run)
	return nil
}

// systemLogs is the /logs/ handler, nil when enableSystemLogHandler is
// false.
func systemLogs(kc *kubeletconfig.KubeletConfiguration) http.Handler {
	if !ptr.Deref(kc.EnableSystemLogHandler, true) {
		return nil
	}
	return server.SystemLogs(server.SystemLogDir)
}

// Pod is the wanted pod of that namespace and name; a non-empty uid must
// be its own or its mirror pod's (the apiserver knows static pods by
// their mirror pods).
func (k *Kubelet) Pod(namespace, name string, uid types.UID) (*v1.Pod, bool) {
	p, ok := k.pods.byFullName(namespace + "/" + name)
	if !ok {
		return nil, false
	}
	if uid == "" || p.UID == uid {
		return p, true
	}
	if mp, ok := k.pods.mirrorOf(p); ok && mp.UID == uid {
		return p, true
	}
	return nil, false
}

// RunningPods are the pods the runtime runs, as upstream's /runningpods/
// shows them: name, namespace, UID and the running containers' names.
func (k *Kubelet) RunningPods(ctx context.Context) ([]*v1.Pod, error) {
	pods, err := k.runtime.ListPods(ctx)
	if err != nil {
		return nil, err
	}
	var out []*v1.Pod
	for _, rp := range pods {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: rp.Name, Namespace: rp.Namespace, UID: rp.ID}}
		running := false
		for _, s := range rp.Sandboxes {
			running = running || s.State == container.StateRunning
		}
		for _, c := range rp.Containers {
			if c.State == container.StateRunning {
				running = true
				p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: c.Name})
			}
		}
		if running {
			out = append(out, p)
		}
	}
	return out, nil
}

// runtimePod is the runtime's view of the pod, fresh from the runtime.
func (k *Kubelet) runtimePod(ctx context.Context, pod *v1.Pod) (*container.Pod, error) {
	pods, err := k.runtime.ListPods(ctx)
	if err != nil {
		return nil, err
	}
	for _, rp := range pods {
		if rp.ID == pod.UID {
			return rp, nil
		}
	}
	return nil, fmt.Errorf("pod %s/%s is not running: %w", pod.Namespace, pod.Name, server.ErrNotFound)
}

// ContainerID is the runtime ID of the pod's container of that name: a
// running instance if there is one.
func (k *Kubelet) ContainerID(ctx context.Context, pod *v1.Pod, name string) (string, error) {
	rp, err := k.runtimePod(ctx, pod)
	if err != nil {
		return "", err
	}
	return pick(rp.Containers, name, fmt.Sprintf("container %q in pod %s/%s", name, pod.Namespace, pod.Name))
}

// SandboxID is the runtime ID of the pod's sandbox: a ready one if there
// is one.
func (k *Kubelet) SandboxID(ctx context.Context, pod *v1.Pod) (string, error) {
	rp, err := k.runtimePod(ctx, pod)
	if err != nil {
		return "", err
	}
	return pick(rp.Sandboxes, "", fmt.Sprintf("sandbox of pod %s/%s", pod.Namespace, pod.Name))
}

// pick returns the ID of a running instance of that name, else of any.
func pick(instances []container.Instance, name, what string) (string, error) {
	id := ""
	for _, c := range instances {
		if c.Name != name {
			continue
		}
		if c.State == container.StateRunning {
			return c.ID, nil
		}
		id = c.ID
	}
	if id == "" {
		return "", fmt.Errorf("%s not found: %w", what, server.ErrNotFound)
	}
	return id, nil
}
