// Command skiff is a kubelet: it runs the pods a node is given on a CRI
// container runtime. Flags and the --config file follow the upstream
// kubelet's.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/kubelet"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "v0.0.0-dev"

// kubernetesVersion is the Kubernetes release whose kubelet Skiff follows.
const kubernetesVersion = "v1.34"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without os.Exit, returning the exit code: 0 on a clean stop,
// 2 for bad flags, 1 for anything else.
func run(args []string, stdout, stderr io.Writer) int {
	defer klog.Flush()
	cfg, err := parseConfig(args)
	switch {
	case errors.Is(err, pflag.ErrHelp):
		var o options
		fs := newFlagSet(&o, stdout)
		fmt.Fprintf(stdout, "Usage of skiff:\n%s", fs.FlagUsages())
		return 0
	case errors.Is(err, errVersion):
		fmt.Fprintf(stdout, "Skiff %s (Kubernetes %s)\n", version, kubernetesVersion)
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "skiff: %v\n", err)
		var fe flagError
		if errors.As(err, &fe) {
			fmt.Fprintln(stderr, "Run 'skiff --help' for usage.")
			return 2
		}
		return 1
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	klog.InfoS("Starting Skiff", "version", version, "node", cfg.NodeName)
	if cfg.CPUProfile != "" {
		stopProfile, err := startCPUProfile(cfg.CPUProfile)
		if err != nil {
			fmt.Fprintf(stderr, "skiff: %v\n", err)
			return 1
		}
		defer stopProfile()
	}
	if err := kubelet.Run(ctx, cfg); err != nil {
		fmt.Fprintf(stderr, "skiff: %v\n", err)
		return 1
	}
	return 0
}
