package kubelet

import (
	"context"
	"fmt"
	"runtime"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"

	"github.com/skiff-sh/skiff/internal/nodestatus"
)

// Version is Skiff's version, reported as the node's kubeletVersion.
var Version = nodestatus.DefaultKubeletVersion

// nodeInfo is what the kubelet needs of its Node: the latest copy, nil
// before registration.
type nodeInfo interface {
	Node() *v1.Node
}

// newClient builds the apiserver client from --kubeconfig with the
// configured QPS, burst and content type.
func newClient(cfg Config) (kubernetes.Interface, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", cfg.Kubeconfig, err)
	}
	kc := cfg.Kubelet
	rc.QPS = float32(*kc.KubeAPIQPS)
	rc.Burst = int(kc.KubeAPIBurst)
	rc.ContentType = kc.ContentType
	rc.UserAgent = fmt.Sprintf("skiff/%s (%s/%s)", Version, runtime.GOOS, runtime.GOARCH)
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("create apiserver client: %w", err)
	}
	return client, nil
}

// newEventRecorder sends events to the apiserver as "kubelet" on this host,
// rate-limited by eventRecordQPS and eventBurst.
func newEventRecorder(ctx context.Context, client kubernetes.Interface, cfg Config) record.EventRecorder {
	kc := cfg.Kubelet
	b := record.NewBroadcaster(record.WithContext(ctx), record.WithCorrelatorOptions(record.CorrelatorOptions{
		QPS: float32(*kc.EventRecordQPS), BurstSize: int(kc.EventBurst),
	}))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	go func() { <-ctx.Done(); b.Shutdown() }()
	return b.NewRecorder(scheme.Scheme, v1.EventSource{Component: "kubelet", Host: cfg.NodeName})
}
