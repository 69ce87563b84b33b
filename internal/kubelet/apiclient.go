package kubelet

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/skiff-sh/skiff/internal/certs"
	"github.com/skiff-sh/skiff/internal/kube"
	"github.com/skiff-sh/skiff/internal/nodestatus"
)

// Version is Skiff's version, reported as the node's kubeletVersion.
var Version = nodestatus.DefaultKubeletVersion

// apiClients are Skiff's apiserver clients. They share one transport:
// the same credentials, certificate rotation and connections.
type apiClients struct {
	// main is rate-limited by kubeAPIQPS and kubeAPIBurst.
	main kube.Interface
	// heartbeat renews the Lease and posts the node status, unthrottled
	// and with upstream's timeout, as upstream's heartbeat client.
	heartbeat kube.Interface
	// reviews makes the kubelet API's TokenReviews and
	// SubjectAccessReviews: anyone reaching the API can cause them, so
	// they stay off main's rate limiter and the server bounds them.
	reviews kube.Interface
	// events sends Events, rate-limited by eventRecordQPS and eventBurst
	// as upstream's event client, so a burst of Events (four or five per
	// pod started) does not queue status reports behind it.
	events kube.Interface
}

// newClient builds the apiserver clients from --kubeconfig with the
// configured QPS, burst and content type, TLS-bootstrapping the
// kubeconfig first when --bootstrap-kubeconfig asks for it. The returned
// credentials must Run when rotateCertificates is on.
func newClient(ctx context.Context, cfg Config) (apiClients, *certs.Client, error) {
	kc := cfg.Kubelet
	creds, err := certs.LoadClient(ctx, certs.ClientConfig{
		Kubeconfig: cfg.Kubeconfig, BootstrapKubeconfig: cfg.BootstrapKubeconfig,
		CertDir: certDir(cfg), NodeName: cfg.NodeName, Rotate: kc.RotateCertificates,
		RenewFailures: cfg.Metrics.ClientCertRenewErrors,
	})
	if err != nil {
		return apiClients{}, nil, err
	}
	rc := creds.Config
	rc.QPS = float32(*kc.KubeAPIQPS)
	rc.Burst = int(kc.KubeAPIBurst)
	rc.ContentType = kc.ContentType
	rc.UserAgent = fmt.Sprintf("skiff/%s (%s/%s)", Version, runtime.GOOS, runtime.GOARCH)
	var c apiClients
	if c.main, err = kube.NewForConfig(rc); err != nil {
		return apiClients{}, nil, fmt.Errorf("create apiserver client: %w", err)
	}
	timeout := kube.HeartbeatTimeout(kc.NodeStatusUpdateFrequency.Duration, kc.NodeLeaseDurationSeconds)
	if c.heartbeat, err = kube.NewUnthrottled(rc, timeout); err != nil {
		return apiClients{}, nil, fmt.Errorf("create heartbeat client: %w", err)
	}
	if c.reviews, err = kube.NewUnthrottled(rc, 0); err != nil {
		return apiClients{}, nil, fmt.Errorf("create the kubelet API's review client: %w", err)
	}
	if c.events, err = newEventClient(rc, *kc.EventRecordQPS, kc.EventBurst); err != nil {
		return apiClients{}, nil, fmt.Errorf("create the event client: %w", err)
	}
	return c, creds, nil
}

// certDir holds the kubelet's certificates: <root-dir>/pki, as upstream's
// default --cert-dir.
func certDir(cfg Config) string {
	if cfg.CertDir != "" {
		return cfg.CertDir
	}
	return filepath.Join(cfg.RootDir, "pki")
}

// newEventClient is the client Events are sent with: qps and burst are
// eventRecordQPS and eventBurst; a qps of 0 is no limit, as the field's
// documentation says.
func newEventClient(rc *rest.Config, qps, burst int32) (kube.Interface, error) {
	if qps == 0 {
		return kube.NewUnthrottled(rc, 0)
	}
	cfg := rest.CopyConfig(rc)
	cfg.QPS, cfg.Burst = float32(qps), int(burst)
	return kube.NewForConfig(cfg)
}

// newEventRecorder makes a recorder that sends events as "kubelet" on
// this host, once the broadcaster records to a sink. Its correlator
// aggregates and spam-filters with client-go's defaults, as upstream's.
func newEventRecorder(cfg Config) (record.EventBroadcaster, record.EventRecorder) {
	b := record.NewBroadcaster()
	return b, b.NewRecorder(scheme.Scheme, v1.EventSource{Component: "kubelet", Host: cfg.NodeName})
}

// eventSink writes events through the client.
type eventSink = typedcorev1.EventSinkImpl
