package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/skiff-sh/skiff/internal/config"
	"github.com/skiff-sh/skiff/internal/kubelet"
	"github.com/skiff-sh/skiff/internal/loglinks"
)

const defaultRootDir = "/var/lib/kubelet"

// errVersion asks main to print the version and stop.
var errVersion = errors.New("version requested")

// flagError marks a command-line mistake, which exits 2 rather than 1.
type flagError struct{ err error }

func (e flagError) Error() string { return e.err.Error() }
func (e flagError) Unwrap() error { return e.err }

// options holds the settings that live outside KubeletConfiguration.
type options struct {
	configFile             string
	configDir              string
	kubeconfig             string
	bootstrapKubeconfig    string
	hostnameOverride       string
	nodeIP                 string
	certDir                string
	cloudProvider          string
	rootDir                string
	seccompDefault         bool
	podInfraContainerImage string
	// Image credential provider plugins.
	imageCredentialProviderConfig string
	imageCredentialProviderBinDir string
	nodeLabels                    map[string]string
	version                       string // "false", "true" or "raw"
	podStartupBreakdownEvents     bool
	cpuProfile                    string
	devicePluginDir               string
}

// newFlagSet registers every flag of flagTable: flag-only settings on o,
// configuration flags on kc (whose current values are the defaults shown).
func newFlagSet(o *options, kc *kubeletconfigv1beta1.KubeletConfiguration, output io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet("skiff", pflag.ContinueOnError)
	fs.SetOutput(output)
	fs.Usage = func() {} // run prints --help itself, on stdout
	// --log_flush_frequency works as --log-flush-frequency, as upstream.
	fs.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	if o.nodeLabels == nil {
		o.nodeLabels = map[string]string{}
	}
	registerFlags(fs, o, kc)
	return fs
}

// defaultConfig is an empty KubeletConfiguration with upstream's defaults.
func defaultConfig() *kubeletconfigv1beta1.KubeletConfiguration {
	kc := &kubeletconfigv1beta1.KubeletConfiguration{}
	config.SetDefaults(kc)
	return kc
}

// parsed is the command line made sense of.
type parsed struct {
	cfg kubelet.Config
	// warnings name the flags used that have no effect in Skiff.
	warnings []flagWarning
	version  string
}

// parseConfig is parse without the deprecation messages.
func parseConfig(args []string) (kubelet.Config, error) {
	p, err := parse(args, io.Discard)
	if err != nil {
		return kubelet.Config{}, err
	}
	return p.cfg, nil
}

// parse turns command-line arguments (without the program name) into the
// kubelet's configuration as upstream does: parse the flags, load the
// --config file and merge the --config-dir drop-ins, default, then parse
// the flags again over the result so that explicit flags win, and
// validate. Deprecated flags are reported on out. It returns
// pflag.ErrHelp for --help and errVersion for --version.
func parse(args []string, out io.Writer) (*parsed, error) {
	o := &options{}
	fs := newFlagSet(o, defaultConfig(), out)
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if o.version != "false" {
		return &parsed{version: o.version}, errVersion
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	kc, err := o.loadConfig(args)
	if err != nil {
		return nil, err
	}
	cfg, err := o.kubeletConfig(kc)
	if err != nil {
		return nil, err
	}
	return &parsed{cfg: cfg, warnings: flagWarnings(fs)}, nil
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

// loadConfig reads the --config file and --config-dir drop-ins, defaults
// the result and applies the configuration flags over it. Feature gates
// merge: a gate the flags do not name keeps the file's value.
func (o *options) loadConfig(args []string) (*kubeletconfigv1beta1.KubeletConfiguration, error) {
	kc := &kubeletconfigv1beta1.KubeletConfiguration{}
	if o.configFile != "" {
		loaded, err := config.Load(o.configFile)
		if err != nil {
			return nil, err
		}
		kc = loaded
	}
	config.SetDefaults(kc)
	if o.configDir != "" {
		merged, err := config.MergeDropIns(kc, o.configDir)
		if err != nil {
			return nil, err
		}
		kc = merged
	}
	fileGates := kc.FeatureGates
	if err := parseFlags(newFlagSet(&options{}, kc, io.Discard), args); err != nil {
		return nil, err
	}
	for k, v := range fileGates {
		if _, ok := kc.FeatureGates[k]; !ok {
			kc.FeatureGates[k] = v
		}
	}
	if o.seccompDefault { // upstream ORs the flag with the field
		t := true
		kc.SeccompDefault = &t
	}
	if err := config.Validate(kc); err != nil {
		return nil, fmt.Errorf("invalid kubelet configuration:\n%w", err)
	}
	return kc, nil
}

// validate checks the flag-only settings upstream checks before loading
// the configuration.
func (o *options) validate() error {
	var errs []error
	if o.cloudProvider != "" && o.cloudProvider != "external" {
		errs = append(errs, flagError{fmt.Errorf("cloud provider %q was specified, but built-in cloud providers are disabled. Please set --cloud-provider=external and migrate to an external cloud provider", o.cloudProvider)})
	}
	if err := validateNodeLabels(o.nodeLabels); err != nil {
		errs = append(errs, flagError{err})
	}
	if err := validateNodeIP(o.nodeIP); err != nil {
		errs = append(errs, flagError{fmt.Errorf("--node-ip: %w", err)})
	}
	if strings.TrimSpace(o.rootDir) == "" {
		errs = append(errs, flagError{errors.New("--root-dir must not be empty")})
	}
	return errors.Join(errs...)
}

func (o *options) kubeletConfig(kc *kubeletconfigv1beta1.KubeletConfiguration) (kubelet.Config, error) {
	name, err := nodeName(o.hostnameOverride)
	if err != nil {
		return kubelet.Config{}, err
	}
	certDir := o.certDir
	if certDir == "" {
		certDir = filepath.Join(o.rootDir, "pki")
	}
	return kubelet.Config{
		Kubelet:               kc,
		NodeName:              name,
		NodeIP:                strings.TrimSpace(o.nodeIP),
		RootDir:               o.rootDir,
		CertDir:               certDir,
		Kubeconfig:            o.kubeconfig,
		BootstrapKubeconfig:   o.bootstrapKubeconfig,
		NodeLabels:            o.nodeLabels,
		ExternalCloudProvider: o.cloudProvider == "external",

		PodInfraContainerImage: o.podInfraContainerImage,

		ImageCredentialProviderConfig: o.imageCredentialProviderConfig,
		ImageCredentialProviderBinDir: o.imageCredentialProviderBinDir,

		PodStartupBreakdownEvents: o.podStartupBreakdownEvents,
		CPUProfile:                o.cpuProfile,

		ContainerLogsDir: loglinks.DefaultDir,
		DevicePluginDir:  o.devicePluginDir,
	}, nil
}

// flagWarning is a flag used that Skiff accepts but does not act on.
type flagWarning struct{ flag, reason string }

// flagWarnings lists the flags used that Skiff accepts but does not act on.
func flagWarnings(fs *pflag.FlagSet) []flagWarning {
	var out []flagWarning
	for _, d := range flagTable {
		if d.noEffect != "" && fs.Changed(d.name) {
			out = append(out, flagWarning{"--" + d.name, d.noEffect})
		}
	}
	// Upstream's own line: the runtime runs sandboxes with its own image.
	if fs.Changed("pod-infra-container-image") {
		out = append(out, flagWarning{"--pod-infra-container-image", "it will not be pruned by the image garbage collector in kubelet and should also be set in the remote runtime"})
	}
	return out
}
