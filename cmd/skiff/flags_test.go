package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/skiff-sh/skiff/internal/kubelet"
)

const configHeader = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

func writeConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func fakeHostname(t *testing.T, name string, err error) {
	t.Helper()
	old := hostname
	hostname = func() (string, error) { return name, err }
	t.Cleanup(func() { hostname = old })
}

func TestParseConfig(t *testing.T) {
	fakeHostname(t, "  Node-A.Example.COM \n", nil)
	fromFile := writeConfig(t, configHeader+
		"containerRuntimeEndpoint: unix:///run/file.sock\nstaticPodPath: /etc/file-manifests\nmaxPods: 42\n")

	tests := []struct {
		name  string
		args  []string
		check func(t *testing.T, cfg *result)
	}{
		{
			name: "no flags gives defaults",
			args: nil,
			check: func(t *testing.T, r *result) {
				r.eq(t, "node name", r.cfg.NodeName, "node-a.example.com")
				r.eq(t, "root dir", r.cfg.RootDir, "/var/lib/kubelet")
				r.eq(t, "endpoint", r.cfg.Kubelet.ContainerRuntimeEndpoint, "unix:///run/containerd/containerd.sock")
				r.eq(t, "staticPodPath", r.cfg.Kubelet.StaticPodPath, "")
				r.eq(t, "port", r.cfg.Kubelet.Port, int32(10250))
			},
		},
		{
			name: "flags without config file",
			args: []string{
				"--kubeconfig=/etc/kubernetes/kubelet.conf", "--bootstrap-kubeconfig", "/etc/kubernetes/bootstrap.conf",
				"--hostname-override", " MyNode ", "--node-ip=10.0.0.5,fd00::5", "--root-dir=/var/lib/skiff",
				"--container-runtime-endpoint=unix:///run/flag.sock", "--pod-manifest-path=/etc/flag-manifests",
				"--pod-infra-container-image=example.com/pause:1",
				"--cloud-provider=external", "--provider-id=kind://docker/kind/mynode",
			},
			check: func(t *testing.T, r *result) {
				r.eq(t, "external cloud provider", r.cfg.ExternalCloudProvider, true)
				r.eq(t, "providerID", r.cfg.Kubelet.ProviderID, "kind://docker/kind/mynode")
				r.eq(t, "kubeconfig", r.cfg.Kubeconfig, "/etc/kubernetes/kubelet.conf")
				r.eq(t, "bootstrap", r.cfg.BootstrapKubeconfig, "/etc/kubernetes/bootstrap.conf")
				r.eq(t, "node name", r.cfg.NodeName, "mynode")
				r.eq(t, "node ip", r.cfg.NodeIP, "10.0.0.5,fd00::5")
				r.eq(t, "root dir", r.cfg.RootDir, "/var/lib/skiff")
				r.eq(t, "endpoint", r.cfg.Kubelet.ContainerRuntimeEndpoint, "unix:///run/flag.sock")
				r.eq(t, "staticPodPath", r.cfg.Kubelet.StaticPodPath, "/etc/flag-manifests")
			},
		},
		{
			name: "config file values are used when flags are unset",
			args: []string{"--config", fromFile},
			check: func(t *testing.T, r *result) {
				r.eq(t, "endpoint", r.cfg.Kubelet.ContainerRuntimeEndpoint, "unix:///run/file.sock")
				r.eq(t, "staticPodPath", r.cfg.Kubelet.StaticPodPath, "/etc/file-manifests")
				r.eq(t, "maxPods", r.cfg.Kubelet.MaxPods, int32(42))
				r.eq(t, "defaulted port", r.cfg.Kubelet.Port, int32(10250))
			},
		},
		{
			name: "explicit flags override the config file",
			args: []string{"--config", fromFile, "--container-runtime-endpoint", "unix:///run/flag.sock",
				"--pod-manifest-path", "/etc/flag-manifests"},
			check: func(t *testing.T, r *result) {
				r.eq(t, "endpoint", r.cfg.Kubelet.ContainerRuntimeEndpoint, "unix:///run/flag.sock")
				r.eq(t, "staticPodPath", r.cfg.Kubelet.StaticPodPath, "/etc/flag-manifests")
				r.eq(t, "maxPods", r.cfg.Kubelet.MaxPods, int32(42))
			},
		},
		{
			name: "an explicitly empty flag overrides too",
			args: []string{"--config", fromFile, "--pod-manifest-path="},
			check: func(t *testing.T, r *result) {
				r.eq(t, "staticPodPath", r.cfg.Kubelet.StaticPodPath, "")
			},
		},
		{
			name: "logging flags, underscores accepted",
			args: []string{"--v=3", "--log_flush_frequency=2s", "--vmodule=foo=2"},
			check: func(t *testing.T, r *result) {
				r.eq(t, "verbosity", uint32(r.cfg.Kubelet.Logging.Verbosity), uint32(3))
				r.eq(t, "flush", r.cfg.Kubelet.Logging.FlushFrequency.Duration.Duration, 2*time.Second)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseConfig(tt.args)
			if err != nil {
				t.Fatalf("parseConfig: %v", err)
			}
			if cfg.Kubelet == nil {
				t.Fatal("no KubeletConfiguration")
			}
			tt.check(t, &result{cfg: cfg})
		})
	}
}

func TestParseConfigErrors(t *testing.T) {
	fakeHostname(t, "node", nil)
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	typo := writeConfig(t, configHeader+"readOnlyPrt: 10255\n")
	invalid := writeConfig(t, configHeader+"readOnlyPort: 70000\n")

	tests := []struct {
		name       string
		args       []string
		want       []string
		flagMisuse bool
	}{
		{name: "missing config file", args: []string{"--config", missing},
			want: []string{"config file " + missing, "no such file or directory"}},
		{name: "unknown field in config", args: []string{"--config", typo},
			want: []string{"config file " + typo + `: unknown field "readOnlyPrt"`}},
		{name: "invalid config value", args: []string{"--config", invalid},
			want: []string{"invalid kubelet configuration", "readOnlyPort: Invalid value: 70000: must be between 0 and 65535"}},
		{name: "unknown flag", args: []string{"--bogus"}, want: []string{"unknown flag: --bogus"}, flagMisuse: true},
		{name: "stray argument", args: []string{"extra"}, want: []string{`unexpected arguments: ["extra"]`}, flagMisuse: true},
		{name: "bad node ip", args: []string{"--node-ip=10.0.0.300"}, want: []string{`--node-ip: "10.0.0.300" is not a valid IP address`}, flagMisuse: true},
		{name: "same-family node ips", args: []string{"--node-ip=10.0.0.1,10.0.0.2"}, want: []string{"one IPv4 and one IPv6"}, flagMisuse: true},
		{name: "empty root dir", args: []string{"--root-dir="}, want: []string{"--root-dir must not be empty"}, flagMisuse: true},
		{name: "blank hostname override", args: []string{"--hostname-override", "   "}, want: []string{"empty hostname is invalid"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseConfig(tt.args)
			if err == nil {
				t.Fatal("parseConfig succeeded, want error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			var fe flagError
			if got := errors.As(err, &fe); got != tt.flagMisuse {
				t.Errorf("flag misuse = %v, want %v (%v)", got, tt.flagMisuse, err)
			}
		})
	}
}

func TestParseConfigHostnameError(t *testing.T) {
	fakeHostname(t, "", errors.New("uname failed"))
	_, err := parseConfig(nil)
	if err == nil || !strings.Contains(err.Error(), "couldn't determine hostname: uname failed") {
		t.Fatalf("got %v", err)
	}
	// An override does not need the hostname.
	if _, err := parseConfig([]string{"--hostname-override=n1"}); err != nil {
		t.Fatal(err)
	}
}

func TestParseConfigHelpAndVersion(t *testing.T) {
	if _, err := parseConfig([]string{"--help"}); !errors.Is(err, pflag.ErrHelp) {
		t.Errorf("--help: got %v", err)
	}
	if _, err := parseConfig([]string{"--version"}); !errors.Is(err, errVersion) {
		t.Errorf("--version: got %v", err)
	}
}

func TestRunExitCodes(t *testing.T) {
	fakeHostname(t, "node", nil)
	tests := []struct {
		name        string
		args        []string
		code        int
		out, errOut string
	}{
		{"version", []string{"--version"}, 0, "Kubernetes v1.34.4+skiff.", ""},
		{"raw version", []string{"--version=raw"}, 0, `GitVersion:"v1.34.4+skiff.`, ""},
		{"bad version", []string{"--version=v9"}, 2, "", "--version=v9"},
		{"help", []string{"--help"}, 0, "--pod-infra-container-image", ""},
		{"bad flag", []string{"--nope"}, 2, "", "skiff: unknown flag: --nope"},
		{"bad config", []string{"--config", "/nonexistent/skiff.yaml"}, 1, "", "skiff: config file /nonexistent/skiff.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run(tt.args, &out, &errOut); code != tt.code {
				t.Errorf("exit code %d, want %d (stderr %q)", code, tt.code, errOut.String())
			}
			if !strings.Contains(out.String(), tt.out) {
				t.Errorf("stdout %q does not contain %q", out.String(), tt.out)
			}
			if !strings.Contains(errOut.String(), tt.errOut) {
				t.Errorf("stderr %q does not contain %q", errOut.String(), tt.errOut)
			}
		})
	}
}

func TestLoggingFlagsAreRegistered(t *testing.T) {
	kc := defaultConfig()
	fs := newFlagSet(&options{}, kc, io.Discard)
	// -v is also usable in its short form, as with the kubelet, and lands
	// in the logging configuration.
	if err := fs.Parse([]string{"-v", "4", "--vmodule=foo=2", "--logging-format=json"}); err != nil {
		t.Fatal(err)
	}
	if kc.Logging.Verbosity != 4 || len(kc.Logging.VModule) != 1 || kc.Logging.Format != "json" {
		t.Errorf("logging config %+v", kc.Logging)
	}
}

type result struct{ cfg kubelet.Config }

func (r *result) eq(t *testing.T, what string, got, want any) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func TestNodeRegistrationFlags(t *testing.T) {
	cfg, err := parseConfig([]string{"--hostname-override", "n1", "--node-labels", "a=1,b.example.com/x=y",
		"--register-node=false", "--register-with-taints", "dedicated=infra:NoSchedule,gpu:NoExecute"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NodeLabels["a"] != "1" || cfg.NodeLabels["b.example.com/x"] != "y" {
		t.Errorf("node labels %v", cfg.NodeLabels)
	}
	if r := cfg.Kubelet.RegisterNode; r == nil || *r {
		t.Errorf("registerNode %v, want false", r)
	}
	taints := cfg.Kubelet.RegisterWithTaints
	if len(taints) != 2 || taints[0].Key != "dedicated" || taints[0].Value != "infra" || taints[0].Effect != "NoSchedule" ||
		taints[1].Key != "gpu" || taints[1].Value != "" || taints[1].Effect != "NoExecute" {
		t.Errorf("taints %+v", taints)
	}
	for _, bad := range []string{"novalue", "k=v:Sometimes", "bad key=v:NoSchedule"} {
		if _, err := parseConfig([]string{"--hostname-override", "n1", "--register-with-taints", bad}); err == nil {
			t.Errorf("taint %q accepted", bad)
		}
	}
}

func TestSkiffOnlyFlags(t *testing.T) {
	fakeHostname(t, "node-a", nil)
	cfg, err := parseConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.PodStartupBreakdownEvents || cfg.CPUProfile != "" {
		t.Errorf("defaults: breakdown events %v, cpu profile %q; want off", cfg.PodStartupBreakdownEvents, cfg.CPUProfile)
	}
	cfg, err = parseConfig([]string{"--pod-startup-breakdown-events", "--cpu-profile", "/tmp/skiff.pprof"})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.PodStartupBreakdownEvents || cfg.CPUProfile != "/tmp/skiff.pprof" {
		t.Errorf("got breakdown events %v, cpu profile %q", cfg.PodStartupBreakdownEvents, cfg.CPUProfile)
	}
}
