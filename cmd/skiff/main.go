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
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/version"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/config"
	"github.com/skiff-sh/skiff/internal/kubelet"
	"github.com/skiff-sh/skiff/internal/metrics"
)

// skiffVersion is set at build time with -ldflags "-X main.skiffVersion=...".
var skiffVersion = "v0.0.0-dev"

// kubernetesVersion is the Kubernetes release whose kubelet Skiff follows.
const kubernetesVersion = "v1.34.4"

// gitVersion is what --version reports: the Kubernetes release, with
// Skiff's own version as semver build metadata, which kubeadm's version
// check accepts and ignores.
func gitVersion() string {
	return kubernetesVersion + "+skiff." + strings.TrimPrefix(skiffVersion, "v")
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without os.Exit, returning the exit code: 0 on a clean stop,
// 2 for bad flags, 1 for anything else.
func run(args []string, stdout, stderr io.Writer) int {
	defer klog.Flush()
	p, err := parse(args, stderr)
	switch {
	case errors.Is(err, pflag.ErrHelp):
		fs := newFlagSet(&options{}, defaultConfig(), stdout)
		fmt.Fprintf(stdout, "Usage of skiff:\n%s", fs.FlagUsages())
		return 0
	case errors.Is(err, errVersion):
		return printVersion(stdout, stderr, p.version)
	case err != nil:
		fmt.Fprintf(stderr, "skiff: %v\n", err)
		var fe flagError
		if errors.As(err, &fe) {
			fmt.Fprintln(stderr, "Run 'skiff --help' for usage.")
			return 2
		}
		return 1
	}
	cfg := p.cfg
	if err := start(cfg, p.warnings); err != nil {
		fmt.Fprintf(stderr, "skiff: %v\n", err)
		return 1
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	klog.InfoS("Starting Skiff", "version", skiffVersion, "kubeletVersion", gitVersion(), "node", cfg.NodeName)
	if cfg.CPUProfile != "" {
		stopProfile, err := startCPUProfile(cfg.CPUProfile)
		if err != nil {
			fmt.Fprintf(stderr, "skiff: %v\n", err)
			return 1
		}
		defer stopProfile()
	}
	// One registry for this kubelet: what it records, /metrics serves.
	cfg.Metrics = metrics.New()
	if err := kubelet.Run(ctx, cfg); err != nil {
		fmt.Fprintf(stderr, "skiff: %v\n", err)
		return 1
	}
	return 0
}

// start applies the logging configuration, logs what Skiff will not do,
// makes upstream's checks of the machine and sets the open files limit.
func start(cfg kubelet.Config, flagWarnings []flagWarning) error {
	kc := cfg.Kubelet
	fg, err := config.FeatureGate(kc.FeatureGates)
	if err != nil {
		return err
	}
	if err := logsapi.ValidateAndApply(&kc.Logging, fg); err != nil {
		return fmt.Errorf("initialize logging: %w", err)
	}
	for _, w := range flagWarnings {
		klog.InfoS("Warning: a flag is set but has no effect in Skiff", "flag", w.flag, "reason", w.reason)
	}
	for _, w := range config.Unhonoured(kc) {
		klog.InfoS("Warning: a KubeletConfiguration field is set but Skiff does not honour it",
			"field", w.Path, "handling", w.Handling.String(), "reason", w.Note)
	}
	if err := config.CheckHost(kc, config.HostPaths); err != nil {
		return err
	}
	setMaxOpenFiles(kc.MaxOpenFiles)
	if kc.OOMScoreAdj != nil {
		setOOMScoreAdj(*kc.OOMScoreAdj)
	}
	return nil
}

// setOOMScoreAdj gives Skiff's own process oomScoreAdj, as upstream; as
// upstream, a failure (lowering it needs CAP_SYS_RESOURCE) is logged.
func setOOMScoreAdj(v int32) {
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte(strconv.Itoa(int(v))), 0); err != nil {
		klog.InfoS("Failed to apply oomScoreAdj", "oomScoreAdj", v, "err", err)
	}
}

// setMaxOpenFiles sets RLIMIT_NOFILE as upstream does; as upstream, a
// failure is logged and not fatal.
func setMaxOpenFiles(n int64) {
	if n <= 0 {
		return
	}
	lim := syscall.Rlimit{Cur: uint64(n), Max: uint64(n)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		klog.ErrorS(err, "Failed to set rlimit on max file handles", "maxOpenFiles", n)
	}
}

// printVersion answers --version (one line kubeadm parses) and
// --version=raw (the whole version record), as upstream's verflag.
func printVersion(stdout, stderr io.Writer, mode string) int {
	switch mode {
	case "true":
		fmt.Fprintf(stdout, "Kubernetes %s\n", gitVersion())
	case "raw":
		major, minor, _ := strings.Cut(strings.TrimPrefix(kubernetesVersion, "v"), ".")
		minor, _, _ = strings.Cut(minor, ".")
		fmt.Fprintf(stdout, "%#v\n", version.Info{
			Major: major, Minor: minor, GitVersion: gitVersion(), GoVersion: runtime.Version(),
			Compiler: runtime.Compiler, Platform: runtime.GOOS + "/" + runtime.GOARCH,
		})
	default:
		fmt.Fprintf(stderr, "skiff: --version=%s: want true, false or raw\n", mode)
		return 2
	}
	return 0
}
