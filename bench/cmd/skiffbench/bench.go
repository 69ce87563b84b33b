package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/skiff-sh/skiff/test/cluster"
	"github.com/skiff-sh/skiff/test/ports"
)

var getOpts = metav1.GetOptions{}

// bench is one benchmark run: the control plane and what every kubelet run
// shares.
type bench struct {
	o          options
	c          *cluster.Cluster
	client     kubernetes.Interface
	nodes      typedcorev1.NodeInterface
	runtime    *criCleaner
	audit      *auditLog
	dir        string // scratch: kubelet roots, logs, the shared config
	config     string
	kubeconfig string
	results    *results
}

func run(ctx context.Context, o options) error {
	dir, err := os.MkdirTemp("", "skiffbench-")
	if err != nil {
		return err
	}
	fmt.Printf("skiffbench: scratch directory %s (kubelet logs)\n", dir)
	b := &bench{o: o, dir: dir, results: newResults(o)}
	if b.runtime, err = newCRICleaner(ctx, o.cri); err != nil {
		return err
	}
	v, err := b.runtime.rs.Version(ctx, "v1")
	if err != nil {
		return fmt.Errorf("runtime version: %w", err)
	}
	b.results.Machine.Runtime = v.RuntimeName + " " + v.RuntimeVersion
	fmt.Printf("skiffbench: container runtime %s\n", b.results.Machine.Runtime)
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return err
	}
	b.audit = &auditLog{path: filepath.Join(dir, "audit.log")}
	fmt.Println("skiffbench: starting the control plane")
	b.c, err = cluster.Start(ctx, cluster.Options{
		Dir:                filepath.Join(dir, "cluster"),
		ExtraAPIServerArgs: auditArgs(policy, b.audit.path),
	})
	if err != nil {
		return err
	}
	defer func() {
		if err := b.c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "skiffbench: stopping the control plane:", err)
		}
	}()
	cfg := b.c.RESTConfig()
	// Create 100 pods at once without client-side throttling.
	cfg.QPS, cfg.Burst = 1000, 1000
	if b.client, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	b.nodes = b.client.CoreV1().Nodes()
	b.kubeconfig = filepath.Join(dir, "node.kubeconfig")
	if err := b.c.NodeKubeconfig(nodeName, b.kubeconfig); err != nil {
		return err
	}
	port, err1 := ports.Free()
	healthz, err2 := ports.Free()
	if err1 != nil || err2 != nil {
		return fmt.Errorf("free ports: %v %v", err1, err2)
	}
	b.config = filepath.Join(dir, "kubelet-config.yaml")
	if err := os.WriteFile(b.config, []byte(kubeletConfig(o.cri, port, healthz, b.c.CAFile())), 0o644); err != nil {
		return err
	}
	if n, err := b.runtime.removeAll(ctx, nil); err != nil {
		return err
	} else if n > 0 {
		fmt.Printf("skiffbench: removed %d leftover sandboxes from the runtime\n", n)
	}

	for round := 1; round <= o.rounds; round++ {
		for _, kind := range roundOrder(round, o.bare) {
			run := b.runKubelet
			if kind == bare {
				run = b.runBare
			}
			if err := run(ctx, kind, round); err != nil {
				// Keep what was measured: an aborted run still says something.
				if werr := b.results.write(o.outDir, os.Stdout); werr != nil {
					fmt.Fprintln(os.Stderr, "skiffbench: writing the partial results:", werr)
				}
				return fmt.Errorf("round %d, %s: %w", round, kind, err)
			}
		}
	}
	if err := b.results.write(o.outDir, os.Stdout); err != nil {
		return err
	}
	return b.checkBudget()
}

// checkBudget judges Skiff's memory against -memory-budget, if given.
func (b *bench) checkBudget() error {
	if b.o.budget == "" {
		return nil
	}
	m, err := readBudget(b.o.budget)
	if err != nil {
		return err
	}
	return b.results.checkBudget(m, b.results.base+"-skiff.heap.txt", os.Stdout)
}

// roundOrder alternates which kubelet goes first from round to round; the
// bare-CRI run goes between them, so that it shares their conditions.
func roundOrder(round int, withBare bool) []string {
	order := []string{skiff, upstream}
	if round%2 == 0 {
		order = []string{upstream, skiff}
	}
	if withBare {
		order = []string{order[0], bare, order[1]}
	}
	return order
}

// runKubelet runs every workload with one kubelet as the node and leaves
// the runtime and the apiserver clean for the next.
func (b *bench) runKubelet(ctx context.Context, kind string, round int) error {
	fmt.Printf("skiffbench: round %d: %s\n", round, kind)
	spec := kubeletSpec{
		kind: kind, bin: b.o.kubeletBin, config: b.config, kubeconfig: b.kubeconfig, cri: b.o.cri,
		dir: filepath.Join(b.dir, fmt.Sprintf("r%d-%s", round, kind)),
	}
	if kind == skiff {
		spec.bin = b.o.skiffBin
		if b.o.profile {
			spec.profile = filepath.Join(spec.dir, "skiff.cpu.pprof")
		}
	}
	p, err := startKubelet(spec)
	if err != nil {
		return err
	}
	s := startSampler(p.pid, 250*time.Millisecond)
	started := time.Now()
	err = b.workloads(ctx, kind, round, p, s, started)
	s.stop()
	if hwm, herr := readVmHWM(p.pid); herr == nil {
		b.results.node(kind, round).VmHWMMB = hwm
	}
	if serr := p.stop(); serr != nil && err == nil {
		err = serr
	}
	if cerr := b.cleanup(ctx, spec); cerr != nil && err == nil {
		err = cerr
	}
	if spec.profile != "" {
		b.results.profiles = append(b.results.profiles, spec.profile)
	}
	return err
}

func (b *bench) workloads(ctx context.Context, kind string, round int, p *kubeletProc, s *sampler, started time.Time) error {
	if err := b.waitNodeReady(ctx, p, 90*time.Second); err != nil {
		return err
	}
	nr := b.results.node(kind, round)
	nr.StartupSeconds = time.Since(started).Seconds()
	sleepCtx(ctx, 5*time.Second) // past the start-up work
	from := time.Now()
	sleepCtx(ctx, b.o.idle)
	nr.Idle = summarize(s.window(from, time.Now()))
	fmt.Printf("  node Ready after %.1fs; idle %.2f%% CPU, %.0f MB\n", nr.StartupSeconds, nr.Idle.CPUPercent, nr.Idle.MedianRSSMB)

	for _, w := range strings.Split(b.o.workloads, ",") {
		if err := ctx.Err(); err != nil {
			return err
		}
		ns, err := b.namespace(ctx)
		if err != nil {
			return err
		}
		wr := &workloadResult{Workload: w, Kubelet: kind, Round: round}
		if w == "c" {
			if honored, why := b.probeHonored(ctx, ns); !honored {
				wr.NotComparable = why
			}
		}
		if b.o.quietIdle > 0 {
			waited, idle, err := waitQuiet(ctx, b.o.quietIdle, quietWindow, b.o.quietMax)
			if err != nil {
				return fmt.Errorf("waiting for a quiet machine: %w", err)
			}
			wr.IdleAtStart, wr.QuietWaitSeconds = idle, waited.Seconds()
		}
		if err := b.audit.skip(); err != nil {
			return err
		}
		from := time.Now()
		r := b.runWorkload(ctx, ns, wr)
		sleepCtx(ctx, 2*time.Second) // trailing event and status requests
		if wr.Requests, err = b.audit.next("system:node:" + nodeName); err != nil {
			return err
		}
		wr.fill(r)
		wr.Usage = summarize(s.window(from, time.Now()))
		if !r.steadyFrom.IsZero() {
			wr.Steady = summarize(s.window(r.steadyFrom, r.steadyTo))
		}
		if kind == skiff {
			wr.Breakdown, wr.BreakdownEvents = b.breakdown(ctx, ns)
		}
		b.results.add(wr)
		fmt.Println("  " + wr.line())
		_ = b.client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		if err := p.alive(); err != nil {
			return err
		}
	}
	return nil
}

// runWorkload runs wr's workload in ns and names it. For the pod starts
// (a–d) it takes the kubelet's CRI operation counts just before the first
// create and again once every pod is Ready (the churn loop: at its end).
func (b *bench) runWorkload(ctx context.Context, ns string, wr *workloadResult) batchResult {
	var before, after criScrape
	h := batchHooks{
		beforeCreate: func() { before = b.scrapeCRIOps(ctx, wr.Kubelet) },
		allReady:     func() { after = b.scrapeCRIOps(ctx, wr.Kubelet) },
	}
	var r batchResult
	switch wr.Workload {
	case "a":
		wr.Name = fmt.Sprintf(workloadNames["a"], b.o.small)
		r = runBatch(ctx, b.client, ns, b.o.small, false, b.o.hold, h)
	case "b":
		wr.Name = fmt.Sprintf(workloadNames["b"], b.o.large)
		h.atSteady = b.heapHook(ctx, wr.Kubelet, wr.Round)
		r = runBatch(ctx, b.client, ns, b.o.large, false, b.o.hold, h)
	case "c":
		wr.Name = fmt.Sprintf(workloadNames["c"], b.o.large)
		r = runBatch(ctx, b.client, ns, b.o.large, true, b.o.hold, h)
	case "d":
		wr.Name = fmt.Sprintf(workloadNames["d"], b.o.churn, b.o.flight)
		r = runChurn(ctx, b.client, ns, b.o.churn, b.o.flight, h)
	case "e":
		wr.Name = fmt.Sprintf(workloadNames["e"], b.o.kills)
		r, wr.Kill = b.runKills(ctx, ns, b.o.kills)
	}
	wr.CRI = criOver(before, after, len(r.pods))
	return r
}

// namespace creates a fresh namespace and waits for its ServiceAccount
// (pods are refused until it exists).
func (b *bench) namespace(ctx context.Context) (string, error) {
	ns, err := b.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-"},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); sleepCtx(ctx, 100*time.Millisecond) {
		if _, err := b.client.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", getOpts); err == nil {
			return ns.Name, nil
		}
	}
	return "", fmt.Errorf("no default ServiceAccount in %s after 1m", ns.Name)
}

// cleanup leaves nothing of a kubelet run behind: its sandboxes, its Node
// and Lease.
func (b *bench) cleanup(ctx context.Context, spec kubeletSpec) error {
	n, err := b.runtime.removeAll(ctx, func(ns string) bool { return strings.HasPrefix(ns, "bench-") })
	if err != nil {
		return err
	}
	if n > 0 {
		fmt.Printf("  removed %d sandboxes %s left behind\n", n, spec.kind)
	}
	_ = b.client.CoordinationV1().Leases("kube-node-lease").Delete(ctx, nodeName, metav1.DeleteOptions{})
	if err := b.nodes.Delete(ctx, nodeName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); sleepCtx(ctx, 200*time.Millisecond) {
		if _, err := b.nodes.Get(ctx, nodeName, getOpts); apierrors.IsNotFound(err) {
			return unmountUnder(filepath.Join(spec.dir, "root"))
		}
	}
	return fmt.Errorf("node %s still exists 30s after its deletion", nodeName)
}
