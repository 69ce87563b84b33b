package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Workload e: n pods that are never restarted, all Ready, then each
// container's process killed from outside (SIGKILL of its host pid, found
// through CRI), one at a time. Per pod it measures, all on this host's
// clock:
//
//	kill → exit: the runtime's FinishedAt of the container
//	exit → patch: the apiserver receives the node's first pods/status
//	              write of the pod after the kill (audit log)
//	patch → watch: an informer sees the container terminated
//
// "Skiff sees it" is inside exit → patch: the upstream kubelet logs
// nothing per pod that would split it, so the two are compared on what
// both show.
const (
	killExit   = "kill→exit"
	exitPatch  = "exit→patch"
	patchWatch = "patch→watch"
	exitWatch  = "exit→watch"
)

// killJitter bounds the random pause before each kill: more than the
// 1 s relist period of both kubelets.
const killJitter = 1500 * time.Millisecond

// killTimes is one pod of workload e.
type killTimes struct {
	name, containerID       string
	killed, exited, patched time.Time
}

// runKills runs workload e and returns its breakdown by stage (seconds).
func (b *bench) runKills(ctx context.Context, ns string, n int) (batchResult, map[string][]float64) {
	var r batchResult
	w, err := watchPods(ctx, b.client, ns)
	if err != nil {
		r.err = err
		return r, nil
	}
	defer w.stop()
	pods := b.client.CoreV1().Pods(ns)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("k%03d", i)
		w.expect(names[i])
	}
	var createErr atomic.Value
	r.start = time.Now()
	parallel(n, 25, func(i int) {
		p := benchPod(names[i], false)
		p.Spec.RestartPolicy = v1.RestartPolicyNever
		w.mark(names[i], func(t *podTimes) { t.created = time.Now() })
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			createErr.Store(err)
		}
	})
	var kills []killTimes
	if e, ok := createErr.Load().(error); ok {
		r.err = fmt.Errorf("create: %w", e)
	} else {
		if err := waitAll(ctx, w, names, readyTimeout(n), readyOf); err != nil {
			r.err = fmt.Errorf("waiting for Ready: %w", err)
		} else {
			r.allReady = time.Now()
			sleepCtx(ctx, time.Second) // let the last status reports settle
			kills, r.err = b.killEach(ctx, w, ns, names)
		}
	}
	r.delStart = time.Now()
	parallel(n, 25, func(i int) { _ = pods.Delete(ctx, names[i], metav1.DeleteOptions{}) })
	if err := waitAll(ctx, w, names, readyTimeout(n), goneOf); err != nil && r.err == nil {
		r.err = fmt.Errorf("waiting for deletion: %w", err)
	}
	r.allGone = time.Now()
	r.pods = w.snapshot()
	return r, b.killBreakdown(w, ns, kills)
}

// killEach kills the pods' containers one after the other, each once the
// watch has seen the previous one terminated.
func (b *bench) killEach(ctx context.Context, w *podWatch, ns string, names []string) ([]killTimes, error) {
	var out []killTimes
	for _, name := range names {
		p, err := b.client.CoreV1().Pods(ns).Get(ctx, name, getOpts)
		if err != nil {
			return out, err
		}
		if len(p.Status.ContainerStatuses) != 1 {
			return out, fmt.Errorf("pod %s has %d container statuses", name, len(p.Status.ContainerStatuses))
		}
		id := p.Status.ContainerStatuses[0].ContainerID
		id = id[strings.Index(id, "://")+3:]
		pid, err := b.runtime.pid(ctx, id)
		if err != nil {
			return out, err
		}
		// A random pause first: killing right after the last report would
		// lock each kill to the same phase of a relisting kubelet's period
		// (a whole period before the next relist), where the exits of a
		// real node land anywhere in it.
		sleepCtx(ctx, rand.N(killJitter))
		k := killTimes{name: name, containerID: id, killed: time.Now()}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return out, fmt.Errorf("kill %s (pid %d): %w", name, pid, err)
		}
		err = waitAll(ctx, w, []string{name}, time.Minute, func(t *podTimes) <-chan struct{} { return t.termCh })
		// Read at once: a kubelet may remove a dead container later.
		k.exited, _ = b.runtime.finishedAt(ctx, id)
		out = append(out, k)
		if err != nil {
			return out, fmt.Errorf("waiting for the kill of %s to be reported: %w", name, err)
		}
	}
	return out, nil
}

// killBreakdown fills in the exits (from the runtime) and the status
// writes (from the audit log), and returns the stages' durations.
func (b *bench) killBreakdown(w *podWatch, ns string, kills []killTimes) map[string][]float64 {
	writes, err := statusWrites(b.audit.path, b.audit.offset, "system:node:"+nodeName, ns)
	if err != nil {
		fmt.Fprintln(os.Stderr, "skiffbench: reading the audit log:", err)
	}
	out := map[string][]float64{}
	add := func(stage string, from, to time.Time) {
		if !from.IsZero() && !to.IsZero() {
			out[stage] = append(out[stage], to.Sub(from).Seconds())
		}
	}
	for _, k := range kills {
		for _, t := range writes[k.name] {
			if !t.Before(k.killed) {
				k.patched = t
				break
			}
		}
		watched := w.get(k.name).terminated
		add(killExit, k.killed, k.exited)
		add(exitPatch, k.exited, k.patched)
		add(patchWatch, k.patched, watched)
		add(exitWatch, k.exited, watched)
	}
	return out
}

// statusWrites reads the audit log from offset and returns, per pod name
// in ns, when the apiserver received each pods/status write by user.
func statusWrites(path string, offset int64, user, ns string) (map[string][]time.Time, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, err
	}
	out := map[string][]time.Time{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		var e struct {
			Verb string `json:"verb"`
			User struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef *struct {
				Resource, Subresource, Namespace, Name string
			} `json:"objectRef"`
			Received time.Time `json:"requestReceivedTimestamp"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.User.Username != user || e.ObjectRef == nil {
			continue
		}
		o := e.ObjectRef
		if o.Resource == "pods" && o.Subresource == "status" && o.Namespace == ns && (e.Verb == "patch" || e.Verb == "update") {
			out[o.Name] = append(out[o.Name], e.Received)
		}
	}
	return out, sc.Err()
}
