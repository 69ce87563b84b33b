package main

import (
	"errors"
	goflag "flag"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/skiff-sh/skiff/internal/config"
	"github.com/skiff-sh/skiff/internal/kubelet"
)

const defaultRootDir = "/var/lib/kubelet"

// errVersion asks main to print the version and stop.
var errVersion = errors.New("version requested")

// flagError marks a command-line mistake, which exits 2 rather than 1.
type flagError struct{ err error }

func (e flagError) Error() string { return e.err.Error() }
func (e flagError) Unwrap() error { return e.err }

// options holds the flags that live outside KubeletConfiguration, plus the
// two that may override it.
type options struct {
	configFile               string
	kubeconfig               string
	bootstrapKubeconfig      string
	hostnameOverride         string
	nodeIP                   string
	rootDir                  string
	containerRuntimeEndpoint string
	podManifestPath          string
	podInfraContainerImage   string
	nodeLabels               map[string]string
	registerNode             bool
	registerWithTaints       []string
	cloudProvider            string
	providerID               string
	version                  bool
	// Skiff's own flags.
	podStartupBreakdownEvents bool
	cpuProfile                string
}

// newFlagSet registers Skiff's flags, named and described as the upstream
// kubelet's, and klog's (-v, --vmodule, --logtostderr, ...).
func newFlagSet(o *options, output io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet("skiff", pflag.ContinueOnError)
	fs.SetOutput(output)
	// Accept --log_file as well as --log-file, as the kubelet does.
	fs.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		return pflag.NormalizedName(strings.ReplaceAll(name, "_", "-"))
	})

	fs.StringVar(&o.configFile, "config", "", "The Kubelet will load its initial configuration from this file. The path may be absolute or relative; relative paths start at the Kubelet's current working directory. Omit this flag to use the built-in default configuration values. Command-line flags override configuration from this file.")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Path to a kubeconfig file, specifying how to connect to the API server. Providing --kubeconfig enables API server mode, omitting --kubeconfig enables standalone mode.")
	fs.StringVar(&o.bootstrapKubeconfig, "bootstrap-kubeconfig", "", "Path to a kubeconfig file that will be used to get client certificate for kubelet. If the file specified by --kubeconfig does not exist, the bootstrap kubeconfig is used to request a client certificate from the API server.")
	fs.StringVar(&o.hostnameOverride, "hostname-override", "", "If non-empty, will use this string as identification instead of the actual hostname.")
	fs.StringVar(&o.nodeIP, "node-ip", "", "IP address (or comma-separated dual-stack IP addresses) of the node. If unset, kubelet will use the node's default IPv4 address, if any, or its default IPv6 address if it has no IPv4 addresses. You can pass '::' to make it prefer the default IPv6 address rather than the default IPv4 address.")
	fs.StringVar(&o.rootDir, "root-dir", defaultRootDir, "Directory path for managing kubelet files (volume mounts, etc).")
	fs.StringVar(&o.containerRuntimeEndpoint, "container-runtime-endpoint", "", "The endpoint of the container runtime service. Unix domain sockets are supported on Linux, e.g. 'unix:///path/to/runtime.sock'. Overrides containerRuntimeEndpoint in the --config file.")
	fs.StringVar(&o.podManifestPath, "pod-manifest-path", "", "Path to the directory containing static pod files to run, or the path to a single static pod file. Files starting with dots will be ignored. Overrides staticPodPath in the --config file.")
	// As upstream 1.34, the value is not used: the runtime runs sandboxes
	// with its own configured image.
	fs.StringVar(&o.podInfraContainerImage, "pod-infra-container-image", "", "Specified image will not be pruned by the image garbage collector. CRI implementations have their own configuration to set this image.")
	_ = fs.MarkDeprecated("pod-infra-container-image", "will be removed in 1.35. Image garbage collector will get sandbox image information from CRI.")
	fs.StringToStringVar(&o.nodeLabels, "node-labels", nil, "Labels to add when registering the node in the cluster. Labels must be key=value pairs separated by ','.")
	fs.BoolVar(&o.registerNode, "register-node", true, "Register the node with the apiserver. Overrides registerNode in the --config file.")
	fs.StringSliceVar(&o.registerWithTaints, "register-with-taints", nil, "Register the node with the given list of taints (comma separated \"<key>=<value>:<effect>\"). No-op if register-node is false. Overrides registerWithTaints in the --config file.")
	fs.StringVar(&o.cloudProvider, "cloud-provider", "", "The provider for cloud services. Set to empty string for running with no cloud provider. Set to 'external' for running with an external cloud provider.")
	fs.StringVar(&o.providerID, "provider-id", "", "Unique identifier for identifying the node in a machine database, i.e cloud provider.")
	fs.BoolVar(&o.version, "version", false, "Print version information and quit.")
	fs.BoolVar(&o.podStartupBreakdownEvents, "pod-startup-breakdown-events", false, "Skiff only: emit one PodStartupBreakdown Event per pod when it first turns Ready, saying where its start-up time went.")
	fs.StringVar(&o.cpuProfile, "cpu-profile", "", "Skiff only: write a CPU profile (go tool pprof) of the whole run to this file; it is complete once Skiff exits.")

	gofs := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(gofs)
	fs.AddGoFlagSet(gofs)
	return fs
}

// parseConfig turns command-line arguments (without the program name) into
// the kubelet's configuration: load the --config file if any, apply the
// flags that were set explicitly, default, validate. It returns pflag.ErrHelp
// for --help and errVersion for --version.
func parseConfig(args []string) (kubelet.Config, error) {
	var o options
	fs := newFlagSet(&o, io.Discard)
	if err := parseFlags(fs, args); err != nil {
		return kubelet.Config{}, err
	}
	if o.version {
		return kubelet.Config{}, errVersion
	}
	return o.kubeletConfig(fs)
}

func parseFlags(fs *pflag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return flagError{err}
	}
	if fs.NArg() > 0 {
		return flagError{fmt.Errorf("unexpected arguments: %q", fs.Args())}
	}
	return nil
}

func (o *options) kubeletConfig(fs *pflag.FlagSet) (kubelet.Config, error) {
	kc := &kubeletconfigv1beta1.KubeletConfiguration{}
	if o.configFile != "" {
		loaded, err := config.Load(o.configFile)
		if err != nil {
			return kubelet.Config{}, err
		}
		kc = loaded
	}
	// Only explicit flags win over the file; an unset flag's default must
	// not hide what the file says.
	if fs.Changed("container-runtime-endpoint") {
		kc.ContainerRuntimeEndpoint = o.containerRuntimeEndpoint
	}
	if fs.Changed("pod-manifest-path") {
		kc.StaticPodPath = o.podManifestPath
	}
	if fs.Changed("register-node") {
		kc.RegisterNode = &o.registerNode
	}
	if fs.Changed("provider-id") {
		kc.ProviderID = o.providerID
	}
	if fs.Changed("register-with-taints") {
		taints, err := parseTaints(o.registerWithTaints)
		if err != nil {
			return kubelet.Config{}, flagError{fmt.Errorf("--register-with-taints: %w", err)}
		}
		kc.RegisterWithTaints = taints
	}
	config.SetDefaults(kc)
	if err := config.Validate(kc); err != nil {
		return kubelet.Config{}, fmt.Errorf("invalid kubelet configuration:\n%w", err)
	}

	var errs []error
	name, err := nodeName(o.hostnameOverride)
	if err != nil {
		errs = append(errs, err)
	}
	// Upstream's words: in-tree cloud providers are gone there too.
	if o.cloudProvider != "" && o.cloudProvider != "external" {
		errs = append(errs, fmt.Errorf("cloud provider %q was specified, but built-in cloud providers are disabled. Please set --cloud-provider=external and migrate to an external cloud provider", o.cloudProvider))
	}
	if err := validateNodeIP(o.nodeIP); err != nil {
		errs = append(errs, flagError{fmt.Errorf("--node-ip: %w", err)})
	}
	if strings.TrimSpace(o.rootDir) == "" {
		errs = append(errs, flagError{errors.New("--root-dir must not be empty")})
	}
	if fs.Changed("pod-infra-container-image") {
		klog.InfoS("--pod-infra-container-image will not be pruned by the image garbage collector in kubelet and should also be set in the remote runtime")
	}
	if len(errs) > 0 {
		return kubelet.Config{}, errors.Join(errs...)
	}
	return kubelet.Config{
		Kubelet:               kc,
		NodeName:              name,
		NodeIP:                strings.TrimSpace(o.nodeIP),
		RootDir:               o.rootDir,
		Kubeconfig:            o.kubeconfig,
		BootstrapKubeconfig:   o.bootstrapKubeconfig,
		NodeLabels:            o.nodeLabels,
		ExternalCloudProvider: o.cloudProvider == "external",

		PodStartupBreakdownEvents: o.podStartupBreakdownEvents,
		CPUProfile:                o.cpuProfile,
	}, nil
}
