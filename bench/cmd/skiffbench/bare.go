package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/config"
	"github.com/skiff-sh/skiff/internal/cri"
	"github.com/skiff-sh/skiff/internal/kubelet"
	"github.com/skiff-sh/skiff/internal/podcgroups"
	"github.com/skiff-sh/skiff/internal/podruntime"
)

// bare is the runtime's own limit: the batches driven straight through
// CRI, with no kubelet and no apiserver.
const bare = "runtime"

// bareRunner starts pods through CRI with the configs Skiff would send:
// its runtime manager builds them (cgroup parent, log paths, DNS,
// /etc/hosts and termination-log mounts, security context, resources)
// from the bench's kubelet configuration, and its cgroup manager makes the
// pod cgroups.
type bareRunner struct {
	cri     *cri.Client
	cgroups *podcgroups.Manager
	pods    *podruntime.Manager
}

func newBareRunner(ctx context.Context, configPath, endpoint, dir string) (*bareRunner, error) {
	kc, err := config.Load(configPath)
	if err != nil {
		return nil, err
	}
	config.SetDefaults(kc)
	c, err := cri.Dial(ctx, endpoint, endpoint, 2*time.Minute, nil)
	if err != nil {
		return nil, err
	}
	cg, err := kubelet.NewPodCgroups(ctx, kubelet.Config{Kubelet: kc, RootDir: dir}, c.Runtime)
	if err != nil {
		return nil, err
	}
	pods := podruntime.New(podruntime.Config{
		CRI:        c,
		PodLogsDir: filepath.Join(dir, "pods-logs"),
		DNS:        podruntime.DNS{ClusterDNS: kc.ClusterDNS, ClusterDomain: kc.ClusterDomain, ResolvConf: ptr.Deref(kc.ResolverConfig, "")},
		PodDir:     func(uid types.UID) string { return filepath.Join(dir, "pods", string(uid)) },
		Resources:  cg,
	})
	return &bareRunner{cri: c, cgroups: cg, pods: pods}, nil
}

// batch starts n pods at once, each with RunPodSandbox, CreateContainer
// and StartContainer and nothing else, then stops and removes them all at
// once. A pod counts as Ready when StartContainer returns.
func (r *bareRunner) batch(ctx context.Context, pods []*v1.Pod) batchResult {
	var res batchResult
	n := len(pods)
	times := make([]podTimes, n)
	sandboxes := make([]string, n)
	errs := make([]error, n)
	res.start = time.Now()
	parallel(n, n, func(i int) {
		times[i].created = time.Now()
		sandboxes[i], errs[i] = r.start(ctx, pods[i])
		if errs[i] == nil {
			times[i].running = time.Now()
			times[i].ready = times[i].running
		}
	})
	if err := errors.Join(errs...); err != nil {
		res.err = err
	} else {
		res.allReady = time.Now()
	}
	res.delStart = time.Now()
	parallel(n, n, func(i int) {
		times[i].deleteReq = time.Now()
		errs[i] = r.remove(ctx, pods[i], sandboxes[i])
		times[i].gone = time.Now()
	})
	if err := errors.Join(errs...); err != nil && res.err == nil {
		res.err = err
	} else if err == nil {
		res.allGone = time.Now()
	}
	res.pods = times
	return res
}

func (r *bareRunner) start(ctx context.Context, pod *v1.Pod) (string, error) {
	if err := r.cgroups.EnsurePod(pod); err != nil {
		return "", err
	}
	sb, ctrs, err := r.pods.PodConfigs(ctx, pod)
	if err != nil {
		return "", err
	}
	id, err := r.cri.Runtime.RunPodSandbox(ctx, sb, "")
	if err != nil {
		return "", fmt.Errorf("%s: run sandbox: %w", pod.Name, err)
	}
	for _, c := range ctrs {
		cid, err := r.cri.Runtime.CreateContainer(ctx, id, c, sb)
		if err != nil {
			return id, fmt.Errorf("%s: create container: %w", pod.Name, err)
		}
		if err := r.cri.Runtime.StartContainer(ctx, cid); err != nil {
			return id, fmt.Errorf("%s: start container: %w", pod.Name, err)
		}
	}
	return id, nil
}

func (r *bareRunner) remove(ctx context.Context, pod *v1.Pod, sandbox string) error {
	var errs []error
	if sandbox != "" {
		if err := r.cri.Runtime.StopPodSandbox(ctx, sandbox); err != nil && !cri.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("%s: stop sandbox: %w", pod.Name, err))
		}
		if err := r.cri.Runtime.RemovePodSandbox(ctx, sandbox); err != nil && !cri.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("%s: remove sandbox: %w", pod.Name, err))
		}
	}
	if err := r.cgroups.RemovePod(pod.UID); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// runBare runs the batch workloads (a and b) straight through CRI, as the
// third column every kubelet's batch is compared against.
func (b *bench) runBare(ctx context.Context, _ string, round int) error {
	fmt.Printf("skiffbench: round %d: %s (no kubelet)\n", round, bare)
	r, err := newBareRunner(ctx, b.config, b.o.cri, filepath.Join(b.dir, fmt.Sprintf("r%d-%s", round, bare)))
	if err != nil {
		return err
	}
	for _, w := range strings.Split(b.o.workloads, ",") {
		n := map[string]int{"a": b.o.small, "b": b.o.large}[w]
		if n == 0 {
			continue
		}
		ns, err := b.namespace(ctx)
		if err != nil {
			return err
		}
		pods, err := b.defaulted(ctx, ns, n)
		if err != nil {
			return err
		}
		wr := &workloadResult{Workload: w, Name: fmt.Sprintf(workloadNames[w], n), Kubelet: bare, Round: round}
		if b.o.quietIdle > 0 {
			waited, idle, err := waitQuiet(ctx, b.o.quietIdle, quietWindow, b.o.quietMax)
			if err != nil {
				return fmt.Errorf("waiting for a quiet machine: %w", err)
			}
			wr.IdleAtStart, wr.QuietWaitSeconds = idle, waited.Seconds()
		}
		wr.fill(r.batch(ctx, pods))
		b.results.add(wr)
		fmt.Println("  " + wr.line())
		_ = b.client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		if left, err := b.runtime.removeAll(ctx, func(pns string) bool { return pns == ns }); err != nil {
			return err
		} else if left > 0 {
			fmt.Printf("  removed %d sandboxes the bare batch left behind\n", left)
		}
	}
	return nil
}

// defaulted returns the batch's pods as the apiserver would hand them to
// a kubelet (API defaults, admission), through a dry-run create: nothing
// is stored.
func (b *bench) defaulted(ctx context.Context, ns string, n int) ([]*v1.Pod, error) {
	pods := make([]*v1.Pod, n)
	for i := range pods {
		p, err := b.client.CoreV1().Pods(ns).Create(ctx, benchPod(fmt.Sprintf("p%03d", i), false),
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return nil, fmt.Errorf("dry-run create: %w", err)
		}
		pods[i] = p
	}
	return pods, nil
}
