package kube

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// ListerWatcher is a typed client of one resource, such as
// client.CoreV1().Pods(namespace).
type ListerWatcher[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// NewInformer is what client-go's generated NewFiltered<Kind>Informer
// functions do, for any typed client: an informer of obj (a pointer to
// the resource's type) that lists and watches through c with every
// request's options passed through tweak (may be nil), and no resync.
//
// It stands in for informers.SharedInformerFactory, whose ForResource
// and group accessors link the informers, listers and typed clients of
// every API group into the binary (package kube's comment), and for the
// generated constructors, which take a whole kubernetes.Interface.
func NewInformer[L runtime.Object](c ListerWatcher[L], obj runtime.Object, tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
	if tweak == nil {
		tweak = func(*metav1.ListOptions) {}
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			tweak(&o)
			return c.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			tweak(&o)
			return c.Watch(ctx, o)
		},
	}
	return cache.NewSharedIndexInformer(lw, obj, 0, cache.Indexers{})
}

// RunInformer runs informer in a goroutine until ctx ends; the returned
// function waits for it to stop (a factory's Start and Shutdown).
func RunInformer(ctx context.Context, informer cache.SharedIndexInformer) (wait func()) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		informer.RunWithContext(ctx)
	}()
	return wg.Wait
}
