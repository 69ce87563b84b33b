package kubelet

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/skiff-sh/skiff/internal/certs"
	"github.com/skiff-sh/skiff/internal/kube"
	"github.com/skiff-sh/skiff/internal/nodestatus"
)

// Version is Skiff's version, reported as the node's kubeletVersion.
var Version = nodestatus.DefaultKubeletVersion

// newClient builds the apiserver client from --kubeconfig with the
// configured QPS, burst and content type, TLS-bootstrapping the
// kubeconfig first when --bootstrap-kubeconfig asks for it. The returned
// credentials must Run when rotateCertificates is on.
func newClient(ctx context.Context, cfg Config) (kube.Interface, *certs.Client, error) {
	kc := cfg.Kubelet
	creds, err := certs.LoadClient(ctx, certs.ClientConfig{
		Kubeconfig: cfg.Kubeconfig, BootstrapKubeconfig: cfg.BootstrapKubeconfig,
		CertDir: certDir(cfg), NodeName: cfg.NodeName, Rotate: kc.RotateCertificates,
	})
	if err != nil {
		return nil, nil, err
	}
	rc := creds.Config
	rc.QPS = float32(*kc.KubeAPIQPS)
	rc.Burst = int(kc.KubeAPIBurst)
	rc.ContentType = kc.ContentType
	rc.UserAgent = fmt.Sprintf("skiff/%s (%s/%s)", Version, runtime.GOOS, runtime.GOARCH)
	client, err := kube.NewForConfig(rc)
	if err != nil {
		return nil, nil, fmt.Errorf("create apiserver client: %w", err)
	}
	return client, creds, nil
}

// certDir holds the kubelet's certificates: <root-dir>/pki, as upstream's
// default --cert-dir.
func certDir(cfg Config) string { return filepath.Join(cfg.RootDir, "pki") }

// newEventRecorder makes a recorder that sends events as "kubelet" on
// this host, rate-limited by eventRecordQPS and eventBurst, once the
// broadcaster records to a sink.
func newEventRecorder(cfg Config) (record.EventBroadcaster, record.EventRecorder) {
	kc := cfg.Kubelet
	b := record.NewBroadcaster(record.WithCorrelatorOptions(record.CorrelatorOptions{
		QPS: float32(*kc.EventRecordQPS), BurstSize: int(kc.EventBurst),
	}))
	return b, b.NewRecorder(scheme.Scheme, v1.EventSource{Component: "kubelet", Host: cfg.NodeName})
}

// eventSink writes events through the client.
type eventSink = typedcorev1.EventSinkImpl
