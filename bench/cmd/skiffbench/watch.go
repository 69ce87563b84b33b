package main

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// podTimes is what the benchmark observed of one pod. All times are this
// process's clock: created and deleteReq just before the request, the
// others when the watch delivered the change.
type podTimes struct {
	created   time.Time
	running   time.Time
	ready     time.Time
	deleteReq time.Time
	gone      time.Time
	// terminated: first seen with its (first) container terminated.
	terminated time.Time
	failed     string // a terminal phase or reason seen, if any
	readyCh    chan struct{}
	goneCh     chan struct{}
	termCh     chan struct{}
}

// podWatch records, through an informer on one namespace, when each pod
// first ran, turned Ready and was gone.
type podWatch struct {
	mu   sync.Mutex
	pods map[string]*podTimes
	stop context.CancelFunc
}

func watchPods(ctx context.Context, client kubernetes.Interface, ns string) (*podWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &podWatch{pods: map[string]*podTimes{}, stop: cancel}
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o interface{}) { w.observe(o, false) },
		UpdateFunc: func(_, o interface{}) { w.observe(o, false) },
		DeleteFunc: func(o interface{}) {
			if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = t.Obj
			}
			w.observe(o, true)
		},
	})
	if err != nil {
		cancel()
		return nil, err
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	return w, nil
}

// expect registers a pod about to be created; the returned record is the
// one the watch fills in.
func (w *podWatch) expect(name string) *podTimes {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := &podTimes{readyCh: make(chan struct{}), goneCh: make(chan struct{}), termCh: make(chan struct{})}
	w.pods[name] = t
	return t
}

func (w *podWatch) observe(o interface{}, deleted bool) {
	now := time.Now()
	p, ok := o.(*v1.Pod)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.pods[p.Name]
	if t == nil {
		return
	}
	if deleted {
		if t.gone.IsZero() {
			t.gone = now
			close(t.goneCh)
		}
		return
	}
	if p.Status.Phase == v1.PodRunning && t.running.IsZero() {
		t.running = now
	}
	if (p.Status.Phase == v1.PodFailed || p.Status.Phase == v1.PodSucceeded) && t.failed == "" {
		t.failed = string(p.Status.Phase) + " " + p.Status.Reason
	}
	if cs := p.Status.ContainerStatuses; len(cs) > 0 && cs[0].State.Terminated != nil && t.terminated.IsZero() {
		t.terminated = now
		close(t.termCh)
	}
	if podReady(p) && t.ready.IsZero() {
		t.ready = now
		close(t.readyCh)
	}
}

// mark sets one of a pod's request times (created, deleteReq) under the lock.
func (w *podWatch) mark(name string, set func(*podTimes)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	set(w.pods[name])
}

// snapshot copies the records (under the lock the watch writes with).
func (w *podWatch) snapshot() []podTimes {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]podTimes, 0, len(w.pods))
	for _, t := range w.pods {
		out = append(out, *t)
	}
	return out
}

func (w *podWatch) get(name string) podTimes {
	w.mu.Lock()
	defer w.mu.Unlock()
	return *w.pods[name]
}

func podReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

func nodeIsReady(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}
