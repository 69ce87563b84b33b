// Package apiserver is the pod source for pods the apiserver binds to this
// node: an informer on pods with spec.nodeName=<node>, sent on as full
// snapshots. Mirror pods come through it too; the kubelet tells them apart.
package apiserver

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/kube"
	"github.com/skiff-sh/skiff/internal/podsource"
)

// Config configures the source.
type Config struct {
	Client   corev1client.CoreV1Interface
	NodeName string
}

// Run watches the apiserver and sends a snapshot once the first list is in,
// then after every change, until ctx ends. While the apiserver is away the
// informer retries with back-off and nothing is sent: pods keep running.
func Run(ctx context.Context, cfg Config, out chan<- podsource.Update) {
	selector := fields.OneTermEqualSelector("spec.nodeName", cfg.NodeName).String()
	informer := kube.NewInformer(cfg.Client.Pods(metav1.NamespaceAll), &v1.Pod{},
		func(o *metav1.ListOptions) { o.FieldSelector = selector })
	dirty := make(chan struct{}, 1)
	mark := func() {
		select {
		case dirty <- struct{}{}:
		default:
		}
	}
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { mark() },
		UpdateFunc: func(any, any) { mark() },
		DeleteFunc: func(any) { mark() },
	})
	if err != nil {
		klog.ErrorS(err, "Cannot watch pods")
		return
	}
	defer kube.RunInformer(ctx, informer)()
	start := time.Now()
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return
	}
	klog.InfoS("Pods from the apiserver synced", "node", cfg.NodeName, "took", time.Since(start).Round(time.Millisecond))
	store := informer.GetStore()
	for {
		objs := store.List()
		pods := make([]*v1.Pod, 0, len(objs))
		for _, o := range objs {
			if p, ok := o.(*v1.Pod); ok {
				pods = append(pods, p)
			}
		}
		select {
		case out <- podsource.Update{Source: podsource.APIServer, Pods: pods}:
		case <-ctx.Done():
			return
		}
		select {
		case <-dirty:
		case <-ctx.Done():
			return
		}
	}
}
