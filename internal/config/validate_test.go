package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

type kc = kubeletconfigv1beta1.KubeletConfiguration

func defaulted() *kc {
	c := &kc{}
	SetDefaults(c)
	return c
}

func TestValidateInvalid(t *testing.T) {
	d := func(x time.Duration) metav1.Duration { return metav1.Duration{Duration: x} }
	tests := []struct {
		name   string
		mutate func(c *kc)
		want   []string // each must appear in the error
	}{
		{"readOnlyPort too big", func(c *kc) { c.ReadOnlyPort = 70000 },
			[]string{"readOnlyPort: Invalid value: 70000: must be between 0 and 65535"}},
		{"port zero", func(c *kc) { c.Port = 0 },
			[]string{"port: Invalid value: 0: must be between 1 and 65535"}},
		{"port too big", func(c *kc) { c.Port = 65536 },
			[]string{"port: Invalid value: 65536: must be between 1 and 65535"}},
		{"healthzPort negative", func(c *kc) { c.HealthzPort = ptr.To[int32](-1) },
			[]string{"healthzPort: Invalid value: -1: must be between 0 and 65535"}},
		{"bad address", func(c *kc) { c.Address = "localhost" },
			[]string{`address: Invalid value: "localhost": must be a valid IP address`}},
		{"maxPods negative", func(c *kc) { c.MaxPods = -1 },
			[]string{"maxPods: Invalid value: -1: must not be negative"}},
		{"image GC high over 100", func(c *kc) { c.ImageGCHighThresholdPercent = ptr.To[int32](101) },
			[]string{"imageGCHighThresholdPercent: Invalid value: 101: must be between 0 and 100"}},
		{"image GC low negative", func(c *kc) { c.ImageGCLowThresholdPercent = ptr.To[int32](-1) },
			[]string{"imageGCLowThresholdPercent: Invalid value: -1: must be between 0 and 100"}},
		{"image GC low not below high", func(c *kc) {
			c.ImageGCLowThresholdPercent, c.ImageGCHighThresholdPercent = ptr.To[int32](85), ptr.To[int32](85)
		}, []string{"imageGCLowThresholdPercent: Invalid value: 85: must be less than imageGCHighThresholdPercent (85)"}},
		{"image max GC age not above min", func(c *kc) { c.ImageMaximumGCAge = d(time.Minute) },
			[]string{`imageMaximumGCAge: Invalid value: "1m0s": must be greater than imageMinimumGCAge (2m0s)`}},
		{"nodeLeaseDurationSeconds zero", func(c *kc) { c.NodeLeaseDurationSeconds = 0 },
			[]string{"nodeLeaseDurationSeconds: Invalid value: 0: must be greater than 0"}},
		{"nodeStatusUpdateFrequency negative", func(c *kc) { c.NodeStatusUpdateFrequency = d(-time.Second) },
			[]string{`nodeStatusUpdateFrequency: Invalid value: "-1s": must be greater than 0`}},
		{"syncFrequency negative", func(c *kc) { c.SyncFrequency = d(-time.Second) },
			[]string{`syncFrequency: Invalid value: "-1s"`}},
		{"cgroupDriver unknown", func(c *kc) { c.CgroupDriver = "cgroupv2" },
			[]string{`cgroupDriver: Unsupported value: "cgroupv2": supported values: "cgroupfs", "systemd"`}},
		{"authorization mode unknown", func(c *kc) { c.Authorization.Mode = "RBAC" },
			[]string{`authorization.mode: Unsupported value: "RBAC": supported values: "AlwaysAllow", "Webhook"`}},
		{"eviction signal unknown", func(c *kc) { c.EvictionHard = map[string]string{"disk.available": "1Gi"} },
			[]string{`evictionHard[disk.available]: Unsupported value: "disk.available"`}},
		{"eviction quantity unparseable", func(c *kc) { c.EvictionHard = map[string]string{"memory.available": "lots"} },
			[]string{`evictionHard[memory.available]: Invalid value: "lots"`}},
		{"eviction percentage over 100", func(c *kc) { c.EvictionHard = map[string]string{"nodefs.available": "120%"} },
			[]string{`evictionHard[nodefs.available]: Invalid value: "120%": percentage must be between 0% and 100%`}},
		{"eviction quantity zero", func(c *kc) { c.EvictionHard = map[string]string{"memory.available": "0"} },
			[]string{`evictionHard[memory.available]: Invalid value: "0": must be a positive quantity or a percentage`}},
		{"soft eviction needs grace period", func(c *kc) { c.EvictionSoft = map[string]string{"memory.available": "1Gi"} },
			[]string{"evictionSoftGracePeriod[memory.available]: Required value"}},
		{"soft eviction grace period unparseable", func(c *kc) {
			c.EvictionSoftGracePeriod = map[string]string{"memory.available": "later"}
		}, []string{`evictionSoftGracePeriod[memory.available]: Invalid value: "later"`}},
		{"minimum reclaim negative", func(c *kc) { c.EvictionMinimumReclaim = map[string]string{"memory.available": "-1Mi"} },
			[]string{`evictionMinimumReclaim[memory.available]: Invalid value: "-1Mi": must not be negative`}},
		{"containerLogMaxFiles one", func(c *kc) { c.ContainerLogMaxFiles = ptr.To[int32](1) },
			[]string{"containerLogMaxFiles: Invalid value: 1: must be 2 or greater"}},
		{"containerLogMaxSize unparseable", func(c *kc) { c.ContainerLogMaxSize = "big" },
			[]string{`containerLogMaxSize: Invalid value: "big"`}},
		{"containerLogMaxWorkers zero", func(c *kc) { c.ContainerLogMaxWorkers = ptr.To[int32](0) },
			[]string{"containerLogMaxWorkers: Invalid value: 0: must be 1 or greater"}},
		{"containerLogMonitorInterval short", func(c *kc) { c.ContainerLogMonitorInterval = &metav1.Duration{Duration: time.Second} },
			[]string{`containerLogMonitorInterval: Invalid value: "1s": must be 3s or longer`}},
		{"oomScoreAdj out of range", func(c *kc) { c.OOMScoreAdj = ptr.To[int32](-1001) },
			[]string{"oomScoreAdj: Invalid value: -1001: must be between -1000 and 1000"}},
		{"iptables bit out of range", func(c *kc) { c.IPTablesDropBit = ptr.To[int32](32) },
			[]string{"iptablesDropBit: Invalid value: 32: must be between 0 and 31"}},
		{"negative QPS", func(c *kc) { c.KubeAPIQPS = ptr.To[int32](-1) },
			[]string{"kubeAPIQPS: Invalid value: -1: must not be negative"}},
		{"parallel pulls with serialized pulls", func(c *kc) { c.MaxParallelImagePulls = ptr.To[int32](3) },
			[]string{"maxParallelImagePulls: Invalid value: 3: must be 1 unless serializeImagePulls is false"}},
		{"hairpin mode unknown", func(c *kc) { c.HairpinMode = "loop" },
			[]string{`hairpinMode: Unsupported value: "loop"`}},
		{"topology policy unknown", func(c *kc) { c.TopologyManagerPolicy = "best" },
			[]string{`topologyManagerPolicy: Unsupported value: "best"`}},
		{"cpu manager policy unknown", func(c *kc) { c.CPUManagerPolicy = "dynamic" },
			[]string{`cpuManagerPolicy: Unsupported value: "dynamic"`}},
		{"enforceNodeAllocatable unknown", func(c *kc) { c.EnforceNodeAllocatable = []string{"pods", "everything"} },
			[]string{`enforceNodeAllocatable[1]: Unsupported value: "everything"`}},
		{"enforceNodeAllocatable needs cgroup", func(c *kc) { c.EnforceNodeAllocatable = []string{"system-reserved"} },
			[]string{"systemReservedCgroup: Required value"}},
		{"enforceNodeAllocatable needs cgroupsPerQOS", func(c *kc) { c.CgroupsPerQOS = ptr.To(false) },
			[]string{"cgroupsPerQOS: Invalid value: false"}},
		{"reserved resource unknown", func(c *kc) { c.SystemReserved = map[string]string{"gpu": "1"} },
			[]string{`systemReserved[gpu]: Unsupported value: "gpu"`}},
		{"systemCgroups without cgroupRoot", func(c *kc) { c.SystemCgroups = "/system" },
			[]string{"systemCgroups: Invalid value: \"/system\": requires cgroupRoot to be set"}},
		{"custom CFS period without gate", func(c *kc) { c.CPUCFSQuotaPeriod = &metav1.Duration{Duration: 50 * time.Millisecond} },
			[]string{"cpuCFSQuotaPeriod: Invalid value: \"50ms\": requires feature gate CustomCPUCFSQuotaPeriod"}},
		{"memoryThrottlingFactor over 1", func(c *kc) { c.MemoryThrottlingFactor = ptr.To(1.5) },
			[]string{"memoryThrottlingFactor: Invalid value: 1.5"}},
		{"shutdown critical above total", func(c *kc) {
			c.ShutdownGracePeriod, c.ShutdownGracePeriodCriticalPods = d(10*time.Second), d(20*time.Second)
		}, []string{`shutdownGracePeriodCriticalPods: Invalid value: "20s": must not exceed shutdownGracePeriod (10s)`}},
		{"shutdown below a second", func(c *kc) { c.ShutdownGracePeriod = d(500 * time.Millisecond) },
			[]string{`shutdownGracePeriod: Invalid value: "500ms": must be 0 or at least 1s`}},
		{"empty runtime endpoint", func(c *kc) { c.ContainerRuntimeEndpoint = "" },
			[]string{"containerRuntimeEndpoint: Required value"}},
		{"relative podLogsDir", func(c *kc) { c.PodLogsDir = "logs" },
			[]string{`podLogsDir: Invalid value: "logs": must be an absolute path`}},
		{"runOnce", func(c *kc) { c.RunOnce = true },
			[]string{"runOnce: Forbidden"}},
		{"log query without gate", func(c *kc) { c.EnableSystemLogQuery = ptr.To(true) },
			[]string{"enableSystemLogQuery: Forbidden: requires feature gate NodeLogQuery"}},
		{"log query", func(c *kc) {
			c.EnableSystemLogQuery, c.FeatureGates = ptr.To(true), map[string]bool{"NodeLogQuery": true}
		}, []string{"enableSystemLogQuery: Forbidden: node log queries are not supported by Skiff"}},
		{"clusterDNS not an IP", func(c *kc) { c.ClusterDNS = []string{"10.0.0.10", "dns"} },
			[]string{`clusterDNS[1]: Invalid value: "dns": must be a valid IP address`}},
		{"taint effect unknown", func(c *kc) {
			c.RegisterWithTaints = []corev1.Taint{{Key: "a", Effect: "Evict"}}
		}, []string{`registerWithTaints[0].effect: Unsupported value: "Evict"`}},
		{"tls version unknown", func(c *kc) { c.TLSMinVersion = "TLS1.2" },
			[]string{`tlsMinVersion: Unsupported value: "TLS1.2"`}},
		{"gated field without gate", func(c *kc) { c.ImagePullCredentialsVerificationPolicy = kubeletconfigv1beta1.AlwaysVerify },
			[]string{"imagePullCredentialsVerificationPolicy: Forbidden: requires feature gate KubeletEnsureSecretPulledImages"}},
		{"unknown log format", func(c *kc) { c.Logging.Format = "xml" },
			[]string{`logging.format: Invalid value: "xml": Unsupported log format`}},
		{"every error is reported", func(c *kc) { c.Port, c.ReadOnlyPort, c.MaxPods = 0, -1, -1 },
			[]string{"port: Invalid value: 0", "readOnlyPort: Invalid value: -1", "maxPods: Invalid value: -1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := defaulted()
			tt.mutate(c)
			err := Validate(c)
			if err == nil {
				t.Fatal("Validate succeeded, want error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			var fe *field.Error
			if !errors.As(err, &fe) {
				t.Errorf("error is not a *field.Error: %T", err)
			}
		})
	}
}

func TestValidateValid(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *kc)
	}{
		{"defaults", func(*kc) {}},
		{"read-only and healthz ports off", func(c *kc) { c.ReadOnlyPort, c.HealthzPort = 0, ptr.To[int32](0) }},
		{"0% disables an eviction signal", func(c *kc) { c.EvictionHard = map[string]string{"memory.available": "0%"} }},
		{"no hard eviction", func(c *kc) { c.EvictionHard = map[string]string{} }},
		{"enforce none", func(c *kc) { c.EnforceNodeAllocatable = []string{"none"}; c.CgroupsPerQOS = ptr.To(false) }},
		{"AlwaysAllow", func(c *kc) { c.Authorization.Mode = kubeletconfigv1beta1.KubeletAuthorizationModeAlwaysAllow }},
		{"parallel pulls", func(c *kc) { c.SerializeImagePulls, c.MaxParallelImagePulls = ptr.To(false), ptr.To[int32](5) }},
		{"custom CFS period with gate", func(c *kc) {
			c.FeatureGates = map[string]bool{"CustomCPUCFSQuotaPeriod": true}
			c.CPUCFSQuotaPeriod = &metav1.Duration{Duration: 50 * time.Millisecond}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := defaulted()
			tt.mutate(c)
			if err := Validate(c); err != nil {
				t.Fatalf("Validate: %v", err)
			}
		})
	}
}

func TestValidateNil(t *testing.T) {
	if Validate(nil) == nil {
		t.Fatal("Validate(nil) succeeded")
	}
}

// The full example file goes through the whole pipeline and keeps its values.
func TestFullConfig(t *testing.T) {
	c, err := Load("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	SetDefaults(c)
	if err := Validate(c); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if c.Port != 10260 || c.ReadOnlyPort != 10255 || c.CgroupDriver != "systemd" || c.MaxPods != 250 ||
		*c.ImageGCHighThresholdPercent != 90 || *c.ResolverConfig != "/run/systemd/resolve/resolv.conf" ||
		c.ContainerRuntimeEndpoint != "unix:///run/skiff/cri.sock" || c.Logging.Verbosity != 2 {
		t.Errorf("values lost: %+v", c)
	}
	// mergeDefaultEvictionSettings: true fills the signals the file left out.
	if c.EvictionHard["memory.available"] != "200Mi" || c.EvictionHard["imagefs.available"] != "15%" {
		t.Errorf("evictionHard = %v", c.EvictionHard)
	}
}
