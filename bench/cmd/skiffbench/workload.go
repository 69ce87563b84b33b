package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

var workloadNames = map[string]string{
	"a": "a: batch of %d",
	"b": "b: batch of %d",
	"c": "c: batch of %d, readiness probe",
	"d": "d: churn %d, %d in flight",
	"e": "e: %d containers killed from outside",
}

const busybox = "skiff.local/busybox:1.35"

// benchPod is a busybox sleeping pod bound to the bench node. It mounts no
// service account token, as the reference figures, so a pod's start is
// the kubelet's own work: sandbox, container, status.
func benchPod(name string, probe bool) *v1.Pod {
	grace := int64(1)
	no := false
	c := v1.Container{
		Name: "main", Image: busybox, ImagePullPolicy: v1.PullIfNotPresent,
		Command: []string{"sleep", "3600"},
	}
	if probe {
		c.ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PodSpec{
			NodeName:                      nodeName,
			TerminationGracePeriodSeconds: &grace,
			AutomountServiceAccountToken:  &no,
			Containers:                    []v1.Container{c},
		},
	}
}

// batchResult is what one workload measured.
type batchResult struct {
	pods     []podTimes
	start    time.Time // first create request
	allReady time.Time // last pod Ready (zero if not all were)
	delStart time.Time // first delete request
	allGone  time.Time // last pod gone (zero if not all were)
	err      error     // why it is incomplete
	// steadyFrom/steadyTo: the hold with every pod Ready (batches only).
	steadyFrom, steadyTo time.Time
}

// parallel runs f(0..n-1) with at most width at once.
func parallel(n, width int, f func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, width)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() { defer wg.Done(); defer func() { <-sem }(); f(i) }()
	}
	wg.Wait()
}

// batchHooks run at a workload's moments; a nil one is skipped.
type batchHooks struct {
	beforeCreate func() // just before the first create request
	allReady     func() // once every pod is Ready (churn: the loop ended)
	atSteady     func() // at the end of a batch's hold
}

func callHook(f func()) {
	if f != nil {
		f()
	}
}

// runBatch creates n pods at once, waits until all are Ready, holds them
// for hold, then deletes them all at once and waits until they are gone,
// running the hooks on the way.
func runBatch(ctx context.Context, client kubernetes.Interface, ns string, n int, probe bool, hold time.Duration, h batchHooks) batchResult {
	return watched(ctx, client, ns, func(w *podWatch, pods typedcorev1.PodInterface) batchResult {
		return batch(ctx, w, pods, n, probe, hold, h)
	})
}

// watched runs a workload with a watch on its namespace's pods, and keeps
// the pod times the watch saw.
func watched(ctx context.Context, client kubernetes.Interface, ns string, f func(*podWatch, typedcorev1.PodInterface) batchResult) batchResult {
	w, err := watchPods(ctx, client, ns)
	if err != nil {
		return batchResult{err: err}
	}
	defer w.stop()
	r := f(w, client.CoreV1().Pods(ns))
	r.pods = w.snapshot()
	return r
}

func batch(ctx context.Context, w *podWatch, pods typedcorev1.PodInterface, n int, probe bool, hold time.Duration, h batchHooks) batchResult {
	var r batchResult
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("p%03d", i)
		w.expect(names[i])
	}
	var createErr atomic.Value
	callHook(h.beforeCreate)
	r.start = time.Now()
	parallel(n, 25, func(i int) {
		w.mark(names[i], func(t *podTimes) { t.created = time.Now() })
		if _, err := pods.Create(ctx, benchPod(names[i], probe), metav1.CreateOptions{}); err != nil {
			createErr.Store(err)
		}
	})
	if e, ok := createErr.Load().(error); ok {
		r.err = fmt.Errorf("create: %w", e)
	} else if err := waitAll(ctx, w, names, readyTimeout(n), readyOf); err != nil {
		r.err = fmt.Errorf("waiting for Ready: %w", err)
	} else {
		r.allReady = time.Now()
		callHook(h.allReady)
		sleepCtx(ctx, time.Second) // let the last status reports settle
		r.steadyFrom = time.Now()
		sleepCtx(ctx, hold)
		r.steadyTo = time.Now()
		callHook(h.atSteady)
	}
	r.delStart = time.Now()
	parallel(n, 25, func(i int) {
		w.mark(names[i], func(t *podTimes) { t.deleteReq = time.Now() })
		_ = pods.Delete(ctx, names[i], metav1.DeleteOptions{})
	})
	if err := waitAll(ctx, w, names, readyTimeout(n), goneOf); err != nil {
		if r.err == nil {
			r.err = fmt.Errorf("waiting for deletion: %w", err)
		}
	} else {
		r.allGone = time.Now()
	}
	return r
}

// runChurn creates, waits Ready and deletes total pods, inFlight at a
// time, running h.beforeCreate before the loop and h.allReady after it.
func runChurn(ctx context.Context, client kubernetes.Interface, ns string, total, inFlight int, h batchHooks) batchResult {
	return watched(ctx, client, ns, func(w *podWatch, pods typedcorev1.PodInterface) batchResult {
		return churn(ctx, w, pods, total, inFlight, h)
	})
}

func churn(ctx context.Context, w *podWatch, pods typedcorev1.PodInterface, total, inFlight int, h batchHooks) batchResult {
	var r batchResult
	var next atomic.Int64
	var mu sync.Mutex
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if r.err == nil {
			r.err = err
		}
	}
	callHook(h.beforeCreate)
	r.start = time.Now()
	parallel(inFlight, inFlight, func(int) {
		for {
			i := int(next.Add(1)) - 1
			if i >= total || ctx.Err() != nil {
				return
			}
			name := fmt.Sprintf("c%03d", i)
			w.expect(name)
			w.mark(name, func(t *podTimes) { t.created = time.Now() })
			if _, err := pods.Create(ctx, benchPod(name, false), metav1.CreateOptions{}); err != nil {
				fail(fmt.Errorf("create %s: %w", name, err))
				return
			}
			if err := waitAll(ctx, w, []string{name}, 60*time.Second, readyOf); err != nil {
				fail(fmt.Errorf("waiting for Ready: %w", err))
			}
			w.mark(name, func(t *podTimes) { t.deleteReq = time.Now() })
			_ = pods.Delete(ctx, name, metav1.DeleteOptions{})
			if err := waitAll(ctx, w, []string{name}, 60*time.Second, goneOf); err != nil {
				fail(fmt.Errorf("waiting for deletion: %w", err))
				return
			}
		}
	})
	if r.err == nil {
		r.allReady = time.Now() // churn: the makespan is the whole loop
		r.allGone = r.allReady
		callHook(h.allReady)
	}
	r.delStart = r.start
	return r
}

func readyTimeout(n int) time.Duration { return 60*time.Second + time.Duration(n)*500*time.Millisecond }

func readyOf(t *podTimes) <-chan struct{} { return t.readyCh }
func goneOf(t *podTimes) <-chan struct{}  { return t.goneCh }

// waitAll waits until ch(pod) is closed for every name. While waiting for
// Ready, a pod that ended (Failed/Succeeded) stops the wait early.
func waitAll(ctx context.Context, w *podWatch, names []string, timeout time.Duration, ch func(*podTimes) <-chan struct{}) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for _, n := range names {
		w.mu.Lock()
		t := w.pods[n]
		c := ch(t)
		w.mu.Unlock()
		for done := false; !done; {
			select {
			case <-c:
				done = true
			case <-ctx.Done():
				return ctx.Err()
			case <-deadline.C:
				return fmt.Errorf("pod %s: timed out after %s", n, timeout)
			case <-time.After(time.Second):
				if f := w.get(n).failed; f != "" && t.goneCh != c {
					return fmt.Errorf("pod %s ended: %s", n, f)
				}
			}
		}
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
