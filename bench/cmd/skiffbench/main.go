// Command skiffbench measures Skiff against the upstream kubelet on one
// machine in one run: one control plane (test/cluster), the dev containerd,
// the same workloads with each kubelet as the node, in alternating order
// over rounds. It prints a table and writes JSON and Markdown under
// bench/results. Run it through `make bench`, which holds the e2e lock: only
// one kubelet may use the dev containerd at a time.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

type options struct {
	rounds        int
	small, large  int
	churn, flight int
	kills         int
	workloads     string
	idle          time.Duration
	hold          time.Duration
	skiffBin      string
	kubeletBin    string
	cri           string
	outDir        string
	note          string
	budget        string
	profile       bool
	heapProfile   bool
	importCost    bool
	bare          bool
	quietIdle     float64
	quietMax      time.Duration
}

func main() {
	var o options
	flag.IntVar(&o.rounds, "rounds", 1, "rounds; each runs every workload with both kubelets, the order alternating from round to round (one round of all four workloads is what fits in 20 minutes on a 2-core machine)")
	flag.IntVar(&o.small, "small", 30, "pods in the small batch (workload a)")
	flag.IntVar(&o.large, "large", 100, "pods in the large batch (workloads b and c)")
	flag.IntVar(&o.churn, "churn", 100, "pods in the churn loop (workload d)")
	flag.IntVar(&o.flight, "in-flight", 5, "pods in flight in the churn loop")
	flag.IntVar(&o.kills, "kills", 100, "containers killed from outside in workload e")
	flag.StringVar(&o.workloads, "workloads", "a,b,c,d,e", "workloads to run: a (small batch), b (large batch), c (large batch with a readiness probe), d (churn), e (containers killed from outside: exit to status in the apiserver)")
	flag.DurationVar(&o.idle, "idle", 15*time.Second, "idle window measured after the node is Ready, before the workloads")
	flag.DurationVar(&o.hold, "hold", 5*time.Second, "how long a batch is held Ready to measure steady RSS and CPU")
	flag.StringVar(&o.skiffBin, "skiff", "bin/skiff", "the skiff binary")
	flag.StringVar(&o.kubeletBin, "kubelet", "_output/bin/kubelet", "the upstream kubelet binary")
	flag.StringVar(&o.cri, "cri", "unix:///run/skiff-dev/containerd.sock", "CRI endpoint of the (shared) dev containerd")
	flag.StringVar(&o.outDir, "out", "bench/results", "directory for the JSON and Markdown results")
	flag.StringVar(&o.budget, "memory-budget", "bench/memory-budget.json", "fail when Skiff's idle RSS or its steady RSS with the large batch Ready is over this file's figures by more than its slack (empty: no check)")
	flag.StringVar(&o.note, "note", "", "a note written into the results (e.g. what else ran on the machine)")
	flag.BoolVar(&o.profile, "profile", true, "write a CPU profile of every Skiff run next to the results (skiff --cpu-profile)")
	flag.BoolVar(&o.heapProfile, "heap-profile", true, "fetch each kubelet's heap profile through the apiserver's node proxy at the end of the large batch's hold (workload b), and keep the last with the results")
	flag.BoolVar(&o.bare, "bare", true, "also run the batches (a, b) straight through CRI with no kubelet: the runtime's own limit, the \"× runtime limit\" column")
	flag.Float64Var(&o.quietIdle, "quiet-idle", 0.8, "before each workload, wait until the machine's CPUs were this idle over 5 s (0 to not wait)")
	flag.DurationVar(&o.quietMax, "quiet-max", 90*time.Second, "the longest wait for the machine to be quiet")
	flag.BoolVar(&o.importCost, "import-cost", false, "only measure what Skiff's libraries cost a process (binary size, RSS) with programs that import them, and write the table to -out")
	klog.InitFlags(nil)
	flag.Parse()
	if o.importCost {
		if err := importCost(context.Background(), o.outDir); err != nil {
			fmt.Fprintln(os.Stderr, "skiffbench:", err)
			os.Exit(1)
		}
		return
	}
	if err := o.check(); err != nil {
		fmt.Fprintln(os.Stderr, "skiffbench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "skiffbench:", err)
		os.Exit(1)
	}
}

func (o *options) check() error {
	if o.rounds < 1 || o.small < 1 || o.large < 1 || o.churn < 1 || o.flight < 1 || o.kills < 1 {
		return errors.New("-rounds, -small, -large, -churn, -in-flight and -kills must be positive")
	}
	for _, w := range strings.Split(o.workloads, ",") {
		if _, ok := workloadNames[w]; !ok {
			return fmt.Errorf("-workloads: unknown workload %q (want a, b, c, d or e)", w)
		}
	}
	for _, b := range []*string{&o.skiffBin, &o.kubeletBin} {
		abs, err := filepath.Abs(*b)
		if err != nil {
			return err
		}
		if _, err := os.Stat(abs); err != nil {
			return fmt.Errorf("%s: %w (make build / make tools)", *b, err)
		}
		*b = abs
	}
	// Two kubelets on one containerd remove each other's pods: make bench
	// holds the e2e lock and says so; run by hand, take it here.
	if os.Getenv("SKIFF_E2E_LOCK_HELD") == "" {
		f, err := os.OpenFile("/run/skiff-dev/e2e.lock", os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "skiffbench: waiting for /run/skiff-dev/e2e.lock")
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		// f stays open (and locked) until the process exits.
	}
	return nil
}
