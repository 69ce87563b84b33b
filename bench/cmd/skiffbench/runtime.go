package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	internalapi "k8s.io/cri-api/pkg/apis"
	remote "k8s.io/cri-client/pkg"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/cri"
)

// criCleaner removes what a kubelet left in the shared runtime.
type criCleaner struct{ rs internalapi.RuntimeService }

func newCRICleaner(ctx context.Context, endpoint string) (*criCleaner, error) {
	logger := klog.FromContext(ctx)
	rs, err := remote.NewRemoteRuntimeService(endpoint, time.Minute, nil, &logger)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", endpoint, err)
	}
	return &criCleaner{rs: rs}, nil
}

// removeAll stops and removes every kubelet-made sandbox (with its
// containers) whose pod namespace keep accepts; keep nil means all.
func (c *criCleaner) removeAll(ctx context.Context, keep func(ns string) bool) (int, error) {
	sbs, err := c.rs.ListPodSandbox(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("list sandboxes: %w", err)
	}
	n := 0
	for _, sb := range sbs {
		l := sb.GetLabels()
		if l["io.kubernetes.pod.uid"] == "" || (keep != nil && !keep(l["io.kubernetes.pod.namespace"])) {
			continue
		}
		// The kubelet may be removing it at the same time: gone is done.
		if err := c.rs.StopPodSandbox(ctx, sb.Id); err != nil && !cri.IsNotFound(err) {
			return n, fmt.Errorf("stop sandbox %s: %w", sb.Id, err)
		}
		if err := c.rs.RemovePodSandbox(ctx, sb.Id); err != nil && !cri.IsNotFound(err) {
			return n, fmt.Errorf("remove sandbox %s: %w", sb.Id, err)
		}
		n++
	}
	return n, nil
}

// pid is the host pid of a container's process, from its verbose status.
func (c *criCleaner) pid(ctx context.Context, id string) (int, error) {
	resp, err := c.rs.ContainerStatus(ctx, id, true)
	if err != nil {
		return 0, fmt.Errorf("status of container %s: %w", id, err)
	}
	var info struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(resp.GetInfo()["info"]), &info); err != nil || info.Pid <= 0 {
		return 0, fmt.Errorf("container %s: no pid in its status (%v)", id, err)
	}
	return info.Pid, nil
}

// finishedAt is when the runtime saw the container exit.
func (c *criCleaner) finishedAt(ctx context.Context, id string) (time.Time, error) {
	resp, err := c.rs.ContainerStatus(ctx, id, false)
	if err != nil {
		return time.Time{}, err
	}
	if f := resp.GetStatus().GetFinishedAt(); f > 0 {
		return time.Unix(0, f), nil
	}
	return time.Time{}, fmt.Errorf("container %s has not finished", id)
}

const probeCheckPod = "probe-check"

// probeHonored checks that the kubelet runs readiness probes at all: a pod
// whose probe always fails must run without turning Ready. A kubelet that
// ignores probes would make workload c a copy of b, not a comparison.
func (b *bench) probeHonored(ctx context.Context, ns string) (bool, string) {
	pod := benchPod(probeCheckPod, true)
	pod.Spec.Containers[0].ReadinessProbe.Exec.Command = []string{"false"}
	pods := b.client.CoreV1().Pods(ns)
	w, err := watchPods(ctx, b.client, ns)
	if err != nil {
		return false, err.Error()
	}
	defer w.stop()
	w.expect(pod.Name)
	defer func() {
		_ = pods.Delete(ctx, pod.Name, metav1.DeleteOptions{})
		_ = waitAll(ctx, w, []string{pod.Name}, time.Minute, goneOf)
	}()
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return false, fmt.Sprintf("creating a pod with a readiness probe: %v", err)
	}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); sleepCtx(ctx, 200*time.Millisecond) {
		t := w.get(pod.Name)
		if t.failed != "" {
			return false, "a pod with a readiness probe ended: " + t.failed
		}
		if !t.running.IsZero() {
			sleepCtx(ctx, 4*time.Second) // a first probe runs at once
			if !w.get(pod.Name).ready.IsZero() {
				return false, "readiness probes are not run: a pod whose probe always fails turned Ready"
			}
			return true, ""
		}
	}
	p, _ := pods.Get(ctx, pod.Name, getOpts)
	return false, fmt.Sprintf("a pod with a readiness probe did not run within 60s (%s)", podSummary(p))
}

func podSummary(p *v1.Pod) string {
	if p == nil {
		return "no pod"
	}
	s := string(p.Status.Phase)
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Waiting != nil {
			s += " " + cs.State.Waiting.Reason + ": " + cs.State.Waiting.Message
		}
	}
	return s
}

// readVmHWM returns the process's peak resident set (MB) since it started.
func readVmHWM(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, err := strconv.ParseFloat(f[0], 64)
				return kb / 1024, err
			}
		}
	}
	return 0, fmt.Errorf("no VmHWM")
}

// unmountUnder unmounts whatever a kubelet left mounted at or below dir
// (deepest first), so the scratch directory can be removed.
func unmountUnder(dir string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	var mounts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		// dir itself too: each kubelet makes its root directory a shared
		// bind mount of itself.
		if len(fields) > 4 && (fields[4] == dir || strings.HasPrefix(fields[4], dir+"/")) {
			mounts = append(mounts, fields[4])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(mounts)))
	for _, m := range mounts {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
			return fmt.Errorf("unmount %s: %w", m, err)
		}
	}
	return nil
}

func splitLines(s string) []string { return strings.Split(strings.TrimRight(s, "\n"), "\n") }
