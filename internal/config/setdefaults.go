package config

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logsapi "k8s.io/component-base/logs/api/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

func dur(d time.Duration) metav1.Duration { return metav1.Duration{Duration: d} }

// SetDefaults fills every unset field of c with the upstream v1beta1 default
// (Kubernetes 1.34): pointers that are nil, and zero values of fields where
// upstream treats zero as unset. Fields already set are left alone.
//
// Unlike upstream's scheme defaulting it also fills evictionHard, which
// upstream leaves to the kubelet at startup: nil gets the Linux defaults,
// and with mergeDefaultEvictionSettings missing signals are added.
func SetDefaults(c *kubeletconfigv1beta1.KubeletConfiguration) {
	setServerDefaults(c)
	setNodeStatusDefaults(c)
	setResourceDefaults(c)
	setRuntimeDefaults(c)
	setLoggingAndHandlerDefaults(c)
}

func setServerDefaults(c *kubeletconfigv1beta1.KubeletConfiguration) {
	if c.EnableServer == nil {
		c.EnableServer = ptr.To(true)
	}
	if c.SyncFrequency == zeroDuration {
		c.SyncFrequency = dur(time.Minute)
	}
	if c.FileCheckFrequency == zeroDuration {
		c.FileCheckFrequency = dur(20 * time.Second)
	}
	if c.HTTPCheckFrequency == zeroDuration {
		c.HTTPCheckFrequency = dur(20 * time.Second)
	}
	if c.Address == "" {
		c.Address = "0.0.0.0"
	}
	if c.Port == 0 {
		c.Port = DefaultKubeletPort
	}
	if c.Authentication.Anonymous.Enabled == nil {
		c.Authentication.Anonymous.Enabled = ptr.To(false)
	}
	if c.Authentication.Webhook.Enabled == nil {
		c.Authentication.Webhook.Enabled = ptr.To(true)
	}
	if c.Authentication.Webhook.CacheTTL == zeroDuration {
		c.Authentication.Webhook.CacheTTL = dur(2 * time.Minute)
	}
	if c.Authorization.Mode == "" {
		c.Authorization.Mode = kubeletconfigv1beta1.KubeletAuthorizationModeWebhook
	}
	if c.Authorization.Webhook.CacheAuthorizedTTL == zeroDuration {
		c.Authorization.Webhook.CacheAuthorizedTTL = dur(5 * time.Minute)
	}
	if c.Authorization.Webhook.CacheUnauthorizedTTL == zeroDuration {
		c.Authorization.Webhook.CacheUnauthorizedTTL = dur(30 * time.Second)
	}
	if c.RegistryPullQPS == nil {
		c.RegistryPullQPS = ptr.To[int32](5)
	}
	if c.RegistryBurst == 0 {
		c.RegistryBurst = 10
	}
	if c.EventRecordQPS == nil {
		c.EventRecordQPS = ptr.To[int32](50)
	}
	if c.EventBurst == 0 {
		c.EventBurst = 100
	}
	if c.EnableDebuggingHandlers == nil {
		c.EnableDebuggingHandlers = ptr.To(true)
	}
	if c.HealthzPort == nil {
		c.HealthzPort = ptr.To[int32](DefaultHealthzPort)
	}
	if c.HealthzBindAddress == "" {
		c.HealthzBindAddress = "127.0.0.1"
	}
	if c.OOMScoreAdj == nil {
		c.OOMScoreAdj = ptr.To[int32](DefaultOOMScoreAdj)
	}
	if c.StreamingConnectionIdleTimeout == zeroDuration {
		c.StreamingConnectionIdleTimeout = dur(4 * time.Hour)
	}
	if c.ContentType == "" {
		c.ContentType = "application/vnd.kubernetes.protobuf"
	}
	if c.KubeAPIQPS == nil {
		c.KubeAPIQPS = ptr.To[int32](50)
	}
	if c.KubeAPIBurst == 0 {
		c.KubeAPIBurst = 100
	}
}

func setNodeStatusDefaults(c *kubeletconfigv1beta1.KubeletConfiguration) {
	if c.NodeStatusReportFrequency == zeroDuration {
		// Upstream keeps old configs working: an explicit update frequency
		// also becomes the report frequency.
		if c.NodeStatusUpdateFrequency == zeroDuration {
			c.NodeStatusReportFrequency = dur(5 * time.Minute)
		} else {
			c.NodeStatusReportFrequency = c.NodeStatusUpdateFrequency
		}
	}
	if c.NodeStatusUpdateFrequency == zeroDuration {
		c.NodeStatusUpdateFrequency = dur(10 * time.Second)
	}
	if c.NodeLeaseDurationSeconds == 0 {
		c.NodeLeaseDurationSeconds = 40
	}
	if c.NodeStatusMaxImages == nil {
		c.NodeStatusMaxImages = ptr.To[int32](50)
	}
	if c.RegisterNode == nil {
		c.RegisterNode = ptr.To(true)
	}
}

func setResourceDefaults(c *kubeletconfigv1beta1.KubeletConfiguration) {
	if c.ImageMinimumGCAge == zeroDuration {
		c.ImageMinimumGCAge = dur(2 * time.Minute)
	}
	if c.ImageGCHighThresholdPercent == nil {
		c.ImageGCHighThresholdPercent = ptr.To[int32](85)
	}
	if c.ImageGCLowThresholdPercent == nil {
		c.ImageGCLowThresholdPercent = ptr.To[int32](80)
	}
	if c.VolumeStatsAggPeriod == zeroDuration {
		c.VolumeStatsAggPeriod = dur(time.Minute)
	}
	if c.CgroupsPerQOS == nil {
		c.CgroupsPerQOS = ptr.To(true)
	}
	if c.CgroupDriver == "" {
		c.CgroupDriver = "cgroupfs"
	}
	if c.CPUManagerPolicy == "" {
		c.CPUManagerPolicy = "none"
	}
	if c.CPUManagerReconcilePeriod == zeroDuration {
		c.CPUManagerReconcilePeriod = dur(10 * time.Second)
	}
	if c.MemoryManagerPolicy == "" {
		c.MemoryManagerPolicy = kubeletconfigv1beta1.NoneMemoryManagerPolicy
	}
	if c.TopologyManagerPolicy == "" {
		c.TopologyManagerPolicy = kubeletconfigv1beta1.NoneTopologyManagerPolicy
	}
	if c.TopologyManagerScope == "" {
		c.TopologyManagerScope = kubeletconfigv1beta1.ContainerTopologyManagerScope
	}
	if c.MaxPods == 0 {
		c.MaxPods = 110
	}
	// Upstream also turns a negative limit into -1 (node allocatable limit).
	if c.PodPidsLimit == nil || *c.PodPidsLimit < 0 {
		c.PodPidsLimit = ptr.To[int64](-1)
	}
	if c.CPUCFSQuota == nil {
		c.CPUCFSQuota = ptr.To(true)
	}
	if c.CPUCFSQuotaPeriod == nil {
		c.CPUCFSQuotaPeriod = &metav1.Duration{Duration: defaultCPUCFSQuotaPeriodDuration}
	}
	if c.MaxOpenFiles == 0 {
		c.MaxOpenFiles = 1000000
	}
	if c.EvictionPressureTransitionPeriod == zeroDuration {
		c.EvictionPressureTransitionPeriod = dur(5 * time.Minute)
	}
	if c.MergeDefaultEvictionSettings == nil {
		c.MergeDefaultEvictionSettings = ptr.To(false)
	}
	setEvictionHardDefaults(c)
	if c.EnforceNodeAllocatable == nil {
		c.EnforceNodeAllocatable = DefaultEnforceNodeAllocatable()
	}
	if c.LocalStorageCapacityIsolation == nil {
		c.LocalStorageCapacityIsolation = ptr.To(true)
	}
	if c.MemoryThrottlingFactor == nil {
		c.MemoryThrottlingFactor = ptr.To(DefaultMemoryThrottlingFactor)
	}
	if c.FailSwapOn == nil {
		c.FailSwapOn = ptr.To(true)
	}
	if c.FailCgroupV1 == nil {
		c.FailCgroupV1 = ptr.To(false)
	}
}

// setEvictionHardDefaults: an unset map gets every default; a set map keeps
// its signals only (others are off) unless mergeDefaultEvictionSettings asks
// for the defaults of missing signals too. An explicitly empty map stays
// empty, as upstream, meaning no hard eviction.
func setEvictionHardDefaults(c *kubeletconfigv1beta1.KubeletConfiguration) {
	if c.EvictionHard == nil {
		c.EvictionHard = DefaultEvictionHard()
		return
	}
	if c.MergeDefaultEvictionSettings == nil || !*c.MergeDefaultEvictionSettings {
		return
	}
	for signal, value := range DefaultEvictionHard() {
		if _, ok := c.EvictionHard[signal]; !ok {
			c.EvictionHard[signal] = value
		}
	}
}

func setRuntimeDefaults(c *kubeletconfigv1beta1.KubeletConfiguration) {
	if c.RuntimeRequestTimeout == zeroDuration {
		c.RuntimeRequestTimeout = dur(2 * time.Minute)
	}
	if c.HairpinMode == "" {
		c.HairpinMode = kubeletconfigv1beta1.PromiscuousBridge
	}
	if c.ResolverConfig == nil {
		c.ResolverConfig = ptr.To(DefaultResolvConf)
	}
	if c.SerializeImagePulls == nil {
		// Asking for parallel pulls implies not serializing them, so users
		// need not set both.
		c.SerializeImagePulls = ptr.To(c.MaxParallelImagePulls == nil || *c.MaxParallelImagePulls < 2)
	}
	if c.EnableControllerAttachDetach == nil {
		c.EnableControllerAttachDetach = ptr.To(true)
	}
	if c.MakeIPTablesUtilChains == nil {
		c.MakeIPTablesUtilChains = ptr.To(true)
	}
	if c.IPTablesMasqueradeBit == nil {
		c.IPTablesMasqueradeBit = ptr.To[int32](DefaultIPTablesMasqueradeBit)
	}
	if c.IPTablesDropBit == nil {
		c.IPTablesDropBit = ptr.To[int32](DefaultIPTablesDropBit)
	}
	if c.ContainerLogMaxSize == "" {
		c.ContainerLogMaxSize = "10Mi"
	}
	if c.ContainerLogMaxFiles == nil {
		c.ContainerLogMaxFiles = ptr.To[int32](5)
	}
	if c.ContainerLogMaxWorkers == nil {
		c.ContainerLogMaxWorkers = ptr.To[int32](1)
	}
	if c.ContainerLogMonitorInterval == nil {
		c.ContainerLogMonitorInterval = &metav1.Duration{Duration: 10 * time.Second}
	}
	if c.ConfigMapAndSecretChangeDetectionStrategy == "" {
		c.ConfigMapAndSecretChangeDetectionStrategy = kubeletconfigv1beta1.WatchChangeDetectionStrategy
	}
	if c.VolumePluginDir == "" {
		c.VolumePluginDir = DefaultVolumePluginDir
	}
	if c.SeccompDefault == nil {
		c.SeccompDefault = ptr.To(false)
	}
	if c.ContainerRuntimeEndpoint == "" {
		c.ContainerRuntimeEndpoint = DefaultContainerRuntimeEndpoint
	}
	if c.PodLogsDir == "" {
		c.PodLogsDir = DefaultPodLogsDir
	}
	// These two are defaulted only when their (alpha in 1.34) gate is on,
	// because validation rejects them otherwise.
	if gateEnabled(c, gateCrashLoopBackOffMax) && c.CrashLoopBackOff.MaxContainerRestartPeriod == nil {
		c.CrashLoopBackOff.MaxContainerRestartPeriod = &metav1.Duration{Duration: DefaultMaxContainerRestartPeriod}
	}
	if gateEnabled(c, gateEnsureSecretPulledImages) && c.ImagePullCredentialsVerificationPolicy == "" {
		c.ImagePullCredentialsVerificationPolicy = kubeletconfigv1beta1.NeverVerifyPreloadedImages
	}
}

func setLoggingAndHandlerDefaults(c *kubeletconfigv1beta1.KubeletConfiguration) {
	logsapi.SetRecommendedLoggingConfiguration(&c.Logging)
	if c.EnableSystemLogHandler == nil {
		c.EnableSystemLogHandler = ptr.To(true)
	}
	if c.EnableProfilingHandler == nil {
		c.EnableProfilingHandler = ptr.To(true)
	}
	if c.EnableDebugFlagsHandler == nil {
		c.EnableDebugFlagsHandler = ptr.To(true)
	}
}
