package config

import (
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

func TestSetDefaultsEmpty(t *testing.T) {
	c := &kubeletconfigv1beta1.KubeletConfiguration{}
	SetDefaults(c)
	d := func(x time.Duration) metav1.Duration { return metav1.Duration{Duration: x} }

	tests := []struct {
		field     string
		got, want any
	}{
		{"enableServer", c.EnableServer, ptr.To(true)},
		{"syncFrequency", c.SyncFrequency, d(time.Minute)},
		{"fileCheckFrequency", c.FileCheckFrequency, d(20 * time.Second)},
		{"httpCheckFrequency", c.HTTPCheckFrequency, d(20 * time.Second)},
		{"address", c.Address, "0.0.0.0"},
		{"port", c.Port, int32(10250)},
		{"readOnlyPort", c.ReadOnlyPort, int32(0)},
		{"authentication.anonymous.enabled", c.Authentication.Anonymous.Enabled, ptr.To(false)},
		{"authentication.webhook.enabled", c.Authentication.Webhook.Enabled, ptr.To(true)},
		{"authentication.webhook.cacheTTL", c.Authentication.Webhook.CacheTTL, d(2 * time.Minute)},
		{"authorization.mode", c.Authorization.Mode, kubeletconfigv1beta1.KubeletAuthorizationModeWebhook},
		{"authorization.webhook.cacheAuthorizedTTL", c.Authorization.Webhook.CacheAuthorizedTTL, d(5 * time.Minute)},
		{"authorization.webhook.cacheUnauthorizedTTL", c.Authorization.Webhook.CacheUnauthorizedTTL, d(30 * time.Second)},
		{"registryPullQPS", c.RegistryPullQPS, ptr.To[int32](5)},
		{"registryBurst", c.RegistryBurst, int32(10)},
		{"eventRecordQPS", c.EventRecordQPS, ptr.To[int32](50)},
		{"eventBurst", c.EventBurst, int32(100)},
		{"enableDebuggingHandlers", c.EnableDebuggingHandlers, ptr.To(true)},
		{"healthzPort", c.HealthzPort, ptr.To[int32](10248)},
		{"healthzBindAddress", c.HealthzBindAddress, "127.0.0.1"},
		{"oomScoreAdj", c.OOMScoreAdj, ptr.To[int32](-999)},
		{"clusterDomain", c.ClusterDomain, ""},
		{"streamingConnectionIdleTimeout", c.StreamingConnectionIdleTimeout, d(4 * time.Hour)},
		{"nodeStatusUpdateFrequency", c.NodeStatusUpdateFrequency, d(10 * time.Second)},
		{"nodeStatusReportFrequency", c.NodeStatusReportFrequency, d(5 * time.Minute)},
		{"nodeLeaseDurationSeconds", c.NodeLeaseDurationSeconds, int32(40)},
		{"imageMinimumGCAge", c.ImageMinimumGCAge, d(2 * time.Minute)},
		{"imageMaximumGCAge", c.ImageMaximumGCAge, d(0)},
		{"imageGCHighThresholdPercent", c.ImageGCHighThresholdPercent, ptr.To[int32](85)},
		{"imageGCLowThresholdPercent", c.ImageGCLowThresholdPercent, ptr.To[int32](80)},
		{"volumeStatsAggPeriod", c.VolumeStatsAggPeriod, d(time.Minute)},
		{"cgroupsPerQOS", c.CgroupsPerQOS, ptr.To(true)},
		{"cgroupDriver", c.CgroupDriver, "cgroupfs"},
		{"cpuManagerPolicy", c.CPUManagerPolicy, "none"},
		{"cpuManagerReconcilePeriod", c.CPUManagerReconcilePeriod, d(10 * time.Second)},
		{"memoryManagerPolicy", c.MemoryManagerPolicy, "None"},
		{"topologyManagerPolicy", c.TopologyManagerPolicy, "none"},
		{"topologyManagerScope", c.TopologyManagerScope, "container"},
		{"runtimeRequestTimeout", c.RuntimeRequestTimeout, d(2 * time.Minute)},
		{"hairpinMode", c.HairpinMode, "promiscuous-bridge"},
		{"maxPods", c.MaxPods, int32(110)},
		{"podPidsLimit", c.PodPidsLimit, ptr.To[int64](-1)},
		{"resolvConf", c.ResolverConfig, ptr.To("/etc/resolv.conf")},
		{"cpuCFSQuota", c.CPUCFSQuota, ptr.To(true)},
		{"cpuCFSQuotaPeriod", c.CPUCFSQuotaPeriod, &metav1.Duration{Duration: 100 * time.Millisecond}},
		{"nodeStatusMaxImages", c.NodeStatusMaxImages, ptr.To[int32](50)},
		{"maxOpenFiles", c.MaxOpenFiles, int64(1000000)},
		{"contentType", c.ContentType, "application/vnd.kubernetes.protobuf"},
		{"kubeAPIQPS", c.KubeAPIQPS, ptr.To[int32](50)},
		{"kubeAPIBurst", c.KubeAPIBurst, int32(100)},
		{"serializeImagePulls", c.SerializeImagePulls, ptr.To(true)},
		{"maxParallelImagePulls", c.MaxParallelImagePulls, (*int32)(nil)},
		{"evictionHard", c.EvictionHard, map[string]string{
			"memory.available": "100Mi", "nodefs.available": "10%", "imagefs.available": "15%", "nodefs.inodesFree": "5%"}},
		{"evictionPressureTransitionPeriod", c.EvictionPressureTransitionPeriod, d(5 * time.Minute)},
		{"mergeDefaultEvictionSettings", c.MergeDefaultEvictionSettings, ptr.To(false)},
		{"enableControllerAttachDetach", c.EnableControllerAttachDetach, ptr.To(true)},
		{"makeIPTablesUtilChains", c.MakeIPTablesUtilChains, ptr.To(true)},
		{"iptablesMasqueradeBit", c.IPTablesMasqueradeBit, ptr.To[int32](14)},
		{"iptablesDropBit", c.IPTablesDropBit, ptr.To[int32](15)},
		{"failSwapOn", c.FailSwapOn, ptr.To(true)},
		{"containerLogMaxSize", c.ContainerLogMaxSize, "10Mi"},
		{"containerLogMaxFiles", c.ContainerLogMaxFiles, ptr.To[int32](5)},
		{"containerLogMaxWorkers", c.ContainerLogMaxWorkers, ptr.To[int32](1)},
		{"containerLogMonitorInterval", c.ContainerLogMonitorInterval, &metav1.Duration{Duration: 10 * time.Second}},
		{"configMapAndSecretChangeDetectionStrategy", c.ConfigMapAndSecretChangeDetectionStrategy, kubeletconfigv1beta1.WatchChangeDetectionStrategy},
		{"enforceNodeAllocatable", c.EnforceNodeAllocatable, []string{"pods"}},
		{"volumePluginDir", c.VolumePluginDir, "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/"},
		{"logging.format", c.Logging.Format, "text"},
		{"logging.flushFrequency", c.Logging.FlushFrequency.Duration, d(5 * time.Second)},
		{"enableSystemLogHandler", c.EnableSystemLogHandler, ptr.To(true)},
		{"enableProfilingHandler", c.EnableProfilingHandler, ptr.To(true)},
		{"enableDebugFlagsHandler", c.EnableDebugFlagsHandler, ptr.To(true)},
		{"seccompDefault", c.SeccompDefault, ptr.To(false)},
		{"failCgroupV1", c.FailCgroupV1, ptr.To(false)},
		{"memoryThrottlingFactor", c.MemoryThrottlingFactor, ptr.To(0.9)},
		{"registerNode", c.RegisterNode, ptr.To(true)},
		{"localStorageCapacityIsolation", c.LocalStorageCapacityIsolation, ptr.To(true)},
		{"shutdownGracePeriod", c.ShutdownGracePeriod, d(0)},
		{"shutdownGracePeriodCriticalPods", c.ShutdownGracePeriodCriticalPods, d(0)},
		{"containerRuntimeEndpoint", c.ContainerRuntimeEndpoint, "unix:///run/containerd/containerd.sock"},
		{"imageServiceEndpoint", c.ImageServiceEndpoint, ""},
		{"podLogsDir", c.PodLogsDir, "/var/log/pods"},
		// Gated off by default in 1.34: left unset.
		{"crashLoopBackOff.maxContainerRestartPeriod", c.CrashLoopBackOff.MaxContainerRestartPeriod, (*metav1.Duration)(nil)},
		{"imagePullCredentialsVerificationPolicy", c.ImagePullCredentialsVerificationPolicy, kubeletconfigv1beta1.ImagePullCredentialsVerificationPolicy("")},
	}
	for _, tt := range tests {
		got, want := reflect.ValueOf(tt.got), reflect.ValueOf(tt.want)
		if got.Type() != want.Type() {
			// Typed string constants compare by value.
			if got.Kind() == reflect.String && want.Kind() == reflect.String && got.String() == want.String() {
				continue
			}
			t.Errorf("%s: type %v, want %v", tt.field, got.Type(), want.Type())
			continue
		}
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s = %v, want %v", tt.field, show(tt.got), show(tt.want))
		}
	}

	if err := Validate(c); err != nil {
		t.Errorf("defaulted empty config does not validate: %v", err)
	}
}

func show(v any) any {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer && !rv.IsNil() {
		return rv.Elem().Interface()
	}
	return v
}

func TestSetDefaultsRules(t *testing.T) {
	tests := []struct {
		name  string
		in    kubeletconfigv1beta1.KubeletConfiguration
		check func(t *testing.T, c *kubeletconfigv1beta1.KubeletConfiguration)
	}{
		{
			name: "explicit values are kept, including zero pointers",
			in: kubeletconfigv1beta1.KubeletConfiguration{
				Port:                        1234,
				HealthzPort:                 ptr.To[int32](0),
				RegistryPullQPS:             ptr.To[int32](0),
				ImageGCHighThresholdPercent: ptr.To[int32](100),
				Authentication: kubeletconfigv1beta1.KubeletAuthentication{
					Webhook: kubeletconfigv1beta1.KubeletWebhookAuthentication{Enabled: ptr.To(false)},
				},
				CgroupDriver: "systemd",
			},
			check: func(t *testing.T, c *kubeletconfigv1beta1.KubeletConfiguration) {
				if c.Port != 1234 || *c.HealthzPort != 0 || *c.RegistryPullQPS != 0 ||
					*c.ImageGCHighThresholdPercent != 100 || *c.Authentication.Webhook.Enabled || c.CgroupDriver != "systemd" {
					t.Errorf("explicit values overwritten: %+v", c)
				}
			},
		},
		{
			name: "report frequency follows an explicit update frequency",
			in:   kubeletconfigv1beta1.KubeletConfiguration{NodeStatusUpdateFrequency: metav1.Duration{Duration: 42 * time.Second}},
			check: func(t *testing.T, c *kubeletconfigv1beta1.KubeletConfiguration) {
				if c.NodeStatusReportFrequency.Duration != 42*time.Second {
					t.Errorf("nodeStatusReportFrequency = %v, want 42s", c.NodeStatusReportFrequency)
				}
			},
		},
		{
			name: "parallel pulls turn off serialized pulls",
			in:   kubeletconfigv1beta1.KubeletConfiguration{MaxParallelImagePulls: ptr.To[int32](4)},
			check: func(t *testing.T, c *kubeletconfigv1beta1.KubeletConfiguration) {
				if *c.SerializeImagePulls {
					t.Error("serializeImagePulls = true, want false")
				}
			},
		},
		{
			name: "negative podPidsLimit becomes -1",
			in:   kubeletconfigv1beta1.KubeletConfiguration{PodPidsLimit: ptr.To[int64](-7)},
			check: func(t *testing.T, c *kubeletconfigv1beta1.KubeletConfiguration) {
				if *c.PodPidsLimit != -1 {
					t.Errorf("podPidsLimit = %d, want -1", *c.PodPidsLimit)
				}
			},
		},
		{
			name: "partial evictionHard is not merged by default",
			in:   kubeletconfigv1beta1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "1Gi"}},
			check: func(t *testing.T, c *kubeletconfigv1beta1.KubeletConfiguration) {
				if want := map[string]string{"memory.available": "1Gi"}; !reflect.DeepEqual(c.EvictionHard, want) {
					t.Errorf("evictionHard = %v, want %v", c.EvictionHard, want)
				}
			},
		},
		{
			name: "mergeDefaultEvictionSettings adds missing signals",
			in: kubeletconfigv1beta1.KubeletConfiguration{
				EvictionHard:                 map[string]string{"memory.available": "1Gi"},
				MergeDefaultEvictionSettings: ptr.To(true),
			},
			check: func(t *testing.T, c *kubeletconfigv1beta1.KubeletConfiguration) {
				want := DefaultEvictionHard()
				want["memory.available"] = "1Gi"
				if !reflect.DeepEqual(c.EvictionHard, want) {
					t.Errorf("evictionHard = %v, want %v", c.EvictionHard, want)
				}
			},
		},
		{
			name: "explicitly empty evictionHard stays empty",
			in:   kubeletconfigv1beta1.KubeletConfiguration{EvictionHard: map[string]string{}},
			check: func(t *testing.T, c *kubeletconfigv1beta1.KubeletConfiguration) {
				if len(c.EvictionHard) != 0 {
					t.Errorf("evictionHard = %v, want empty", c.EvictionHard)
				}
			},
		},
		{
			name: "gated defaults apply when their gate is on",
			in: kubeletconfigv1beta1.KubeletConfiguration{FeatureGates: map[string]bool{
				"KubeletCrashLoopBackOffMax": true, "KubeletEnsureSecretPulledImages": true}},
			check: func(t *testing.T, c *kubeletconfigv1beta1.KubeletConfiguration) {
				if p := c.CrashLoopBackOff.MaxContainerRestartPeriod; p == nil || p.Duration != 300*time.Second {
					t.Errorf("maxContainerRestartPeriod = %v, want 300s", p)
				}
				if c.ImagePullCredentialsVerificationPolicy != kubeletconfigv1beta1.NeverVerifyPreloadedImages {
					t.Errorf("imagePullCredentialsVerificationPolicy = %q", c.ImagePullCredentialsVerificationPolicy)
				}
				if err := Validate(c); err != nil {
					t.Errorf("does not validate: %v", err)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.in.DeepCopy()
			SetDefaults(c)
			tt.check(t, c)
		})
	}
}

func TestSetDefaultsIdempotent(t *testing.T) {
	a := &kubeletconfigv1beta1.KubeletConfiguration{}
	SetDefaults(a)
	b := a.DeepCopy()
	SetDefaults(b)
	if !reflect.DeepEqual(a, b) {
		t.Error("a second SetDefaults changed the config")
	}
}

func TestDefaultEvictionHardIsFresh(t *testing.T) {
	DefaultEvictionHard()["memory.available"] = "1"
	if DefaultEvictionHard()["memory.available"] != "100Mi" {
		t.Error("DefaultEvictionHard shares its map")
	}
}
