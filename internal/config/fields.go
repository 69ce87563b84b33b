package config

// Handling says what Skiff does with one KubeletConfiguration field.
type Handling int

const (
	// Honoured: Skiff does what the upstream kubelet does with the field.
	Honoured Handling = iota
	// Partly: Skiff does part of it; a value other than the default is
	// logged at start as a warning with the Note.
	Partly
	// NoEffect: accepted and validated, but Skiff does nothing with it; a
	// value other than the default is logged at start as a warning.
	NoEffect
	// Refused: a value other than the default stops Skiff at start
	// (validation says why).
	Refused
)

func (h Handling) String() string {
	switch h {
	case Honoured:
		return "honoured"
	case Partly:
		return "partly"
	case NoEffect:
		return "no effect (warning)"
	case Refused:
		return "refused"
	}
	return "unknown"
}

// Field is one entry of the field table: a KubeletConfiguration field by
// its JSON path (nested structs joined with dots) and its handling.
type Field struct {
	Path     string
	Handling Handling
	Note     string
}

// Fields lists every field of kubelet.config.k8s.io/v1beta1
// KubeletConfiguration (Kubernetes 1.34) and what Skiff does with it. Tests
// walk the type and fail on any field missing here; the README's table is
// generated from it. When a feature lands, flip its entry to Honoured.
var Fields = []Field{
	{"enableServer", Honoured, ""},
	{"staticPodPath", Honoured, ""},
	{"podLogsDir", Honoured, ""},
	{"syncFrequency", Honoured, ""},
	{"fileCheckFrequency", Honoured, ""},
	{"httpCheckFrequency", Honoured, "poll period of staticPodURL"},
	{"staticPodURL", Honoured, "a v1 Pod or PodList, fetched every httpCheckFrequency"},
	{"staticPodURLHeader", Honoured, ""},
	{"address", Honoured, ""},
	{"port", Honoured, ""},
	{"readOnlyPort", Honoured, ""},
	{"tlsCertFile", Honoured, ""},
	{"tlsPrivateKeyFile", Honoured, ""},
	{"tlsCipherSuites", Honoured, ""},
	{"tlsMinVersion", Honoured, ""},
	{"rotateCertificates", Honoured, ""},
	{"serverTLSBootstrap", Honoured, ""},
	{"authentication.x509.clientCAFile", Honoured, ""},
	{"authentication.webhook.enabled", Honoured, ""},
	{"authentication.webhook.cacheTTL", Honoured, ""},
	{"authentication.anonymous.enabled", Honoured, ""},
	{"authorization.mode", Honoured, ""},
	{"authorization.webhook.cacheAuthorizedTTL", Honoured, ""},
	{"authorization.webhook.cacheUnauthorizedTTL", Honoured, ""},
	{"registryPullQPS", NoEffect, "pulls are not rate-limited"},
	{"registryBurst", NoEffect, "pulls are not rate-limited"},
	{"imagePullCredentialsVerificationPolicy", NoEffect, "pulled images are not re-verified against credentials"},
	{"preloadedImagesVerificationAllowlist", NoEffect, "pulled images are not re-verified against credentials"},
	{"eventRecordQPS", Honoured, ""},
	{"eventBurst", Honoured, ""},
	{"enableDebuggingHandlers", Honoured, ""},
	{"enableContentionProfiling", Honoured, ""},
	{"healthzPort", Honoured, ""},
	{"healthzBindAddress", Honoured, ""},
	{"oomScoreAdj", Honoured, "Skiff's own process; lowering it needs CAP_SYS_RESOURCE"},
	{"clusterDomain", Honoured, ""},
	{"clusterDNS", Honoured, ""},
	{"streamingConnectionIdleTimeout", NoEffect, "streams are proxied to the runtime's streaming server, which keeps its own timeout"},
	{"nodeStatusUpdateFrequency", Honoured, ""},
	{"nodeStatusReportFrequency", Honoured, ""},
	{"nodeLeaseDurationSeconds", Honoured, ""},
	{"imageMinimumGCAge", Honoured, ""},
	{"imageMaximumGCAge", Honoured, ""},
	{"imageGCHighThresholdPercent", Honoured, ""},
	{"imageGCLowThresholdPercent", Honoured, ""},
	{"volumeStatsAggPeriod", Honoured, ""},
	{"kubeletCgroups", NoEffect, "Skiff stays in the cgroup it was started in"},
	{"systemCgroups", NoEffect, "system processes are not moved"},
	{"cgroupRoot", Honoured, ""},
	{"cgroupsPerQOS", Honoured, ""},
	{"cgroupDriver", Honoured, "cgroupfs or systemd slices; the runtime's RuntimeConfig wins when it answers"},
	{"cpuManagerPolicy", NoEffect, "no CPU manager: containers are not pinned to CPUs"},
	{"singleProcessOOMKill", NoEffect, "the runtime's default applies"},
	{"cpuManagerPolicyOptions", NoEffect, "no CPU manager"},
	{"cpuManagerReconcilePeriod", NoEffect, "no CPU manager"},
	{"memoryManagerPolicy", NoEffect, "no memory manager"},
	{"topologyManagerPolicy", NoEffect, "no topology manager"},
	{"topologyManagerScope", NoEffect, "no topology manager"},
	{"topologyManagerPolicyOptions", NoEffect, "no topology manager"},
	{"qosReserved", NoEffect, "QoS cgroups get no memory reservations"},
	{"runtimeRequestTimeout", Honoured, ""},
	{"hairpinMode", NoEffect, "hairpin traffic is the runtime's CNI configuration"},
	{"maxPods", Honoured, ""},
	{"podCIDR", Honoured, ""},
	{"podPidsLimit", Honoured, ""},
	{"resolvConf", Honoured, ""},
	{"runOnce", Refused, "run-once mode is not supported"},
	{"cpuCFSQuota", Honoured, ""},
	{"cpuCFSQuotaPeriod", Honoured, ""},
	{"nodeStatusMaxImages", Honoured, "status.images, largest first"},
	{"maxOpenFiles", Honoured, "RLIMIT_NOFILE of Skiff's own process"},
	{"contentType", Honoured, ""},
	{"kubeAPIQPS", Honoured, ""},
	{"kubeAPIBurst", Honoured, ""},
	{"serializeImagePulls", Honoured, ""},
	{"maxParallelImagePulls", Honoured, ""},
	{"evictionHard", Honoured, ""},
	{"evictionSoft", Honoured, ""},
	{"evictionSoftGracePeriod", Honoured, ""},
	{"evictionPressureTransitionPeriod", Honoured, ""},
	{"evictionMaxPodGracePeriod", Honoured, ""},
	{"evictionMinimumReclaim", Honoured, ""},
	{"mergeDefaultEvictionSettings", Honoured, ""},
	{"podsPerCore", Honoured, ""},
	{"enableControllerAttachDetach", Partly, "false leaves the Node unannotated, but Skiff attaches no volume itself: CSI volumes that need attachment are refused"},
	{"protectKernelDefaults", Honoured, "refuses to start on kernel settings that differ; Skiff never changes them"},
	{"makeIPTablesUtilChains", NoEffect, "no iptables chains are made"},
	{"iptablesMasqueradeBit", NoEffect, "no iptables chains are made"},
	{"iptablesDropBit", NoEffect, "no iptables chains are made"},
	{"featureGates", Honoured, "unknown names and locked gates are refused as upstream; Skiff reads the gates of the features it has; PreventStaticPodAPIReferences=false is refused (static pods that reference API objects are always refused)"},
	{"failSwapOn", Honoured, ""},
	{"memorySwap.swapBehavior", NoEffect, "containers get no swap settings"},
	{"containerLogMaxSize", Honoured, ""},
	{"containerLogMaxFiles", Honoured, ""},
	{"containerLogMaxWorkers", Honoured, ""},
	{"containerLogMonitorInterval", Honoured, ""},
	{"configMapAndSecretChangeDetectionStrategy", Partly, "ConfigMaps and Secrets are read with a GET on every pod sync, whatever the strategy"},
	{"systemReserved", Honoured, ""},
	{"kubeReserved", Honoured, ""},
	{"reservedSystemCPUs", NoEffect, "no CPU manager"},
	{"showHiddenMetricsForVersion", NoEffect, "no hidden metrics"},
	{"systemReservedCgroup", NoEffect, "reservations are not enforced on cgroups"},
	{"kubeReservedCgroup", NoEffect, "reservations are not enforced on cgroups"},
	{"enforceNodeAllocatable", Honoured, ""},
	{"allowedUnsafeSysctls", Honoured, ""},
	{"volumePluginDir", NoEffect, "no FlexVolume plugins"},
	{"providerID", Honoured, ""},
	{"kernelMemcgNotification", NoEffect, "memory signals are polled every 10 s, not notified by the kernel"},
	{"logging.format", Honoured, "text and json"},
	{"logging.flushFrequency", Honoured, ""},
	{"logging.verbosity", Honoured, ""},
	{"logging.vmodule", Honoured, ""},
	{"logging.options.text.splitStream", Honoured, "needs the LoggingAlphaOptions gate"},
	{"logging.options.text.infoBufferSize", Honoured, "needs the LoggingAlphaOptions gate"},
	{"logging.options.json.splitStream", Honoured, "needs the LoggingAlphaOptions gate"},
	{"logging.options.json.infoBufferSize", Honoured, "needs the LoggingAlphaOptions gate"},
	{"enableSystemLogHandler", Honoured, ""},
	{"enableSystemLogQuery", Refused, "node log queries are not supported"},
	{"shutdownGracePeriod", Honoured, "through logind's delay inhibitor over D-Bus; without logind, a warning at start"},
	{"shutdownGracePeriodCriticalPods", Honoured, "as shutdownGracePeriod"},
	{"shutdownGracePeriodByPodPriority", Honoured, "as shutdownGracePeriod"},
	{"crashLoopBackOff.maxContainerRestartPeriod", Honoured, "needs the KubeletCrashLoopBackOffMax gate, as upstream"},
	{"reservedMemory", NoEffect, "no memory manager"},
	{"enableProfilingHandler", Honoured, ""},
	{"enableDebugFlagsHandler", Honoured, ""},
	{"seccompDefault", Honoured, ""},
	{"memoryThrottlingFactor", NoEffect, "no memory QoS"},
	{"registerWithTaints", Honoured, ""},
	{"registerNode", Honoured, ""},
	{"tracing.endpoint", NoEffect, "no tracing"},
	{"tracing.samplingRatePerMillion", NoEffect, "no tracing"},
	{"localStorageCapacityIsolation", Honoured, ""},
	{"containerRuntimeEndpoint", Honoured, ""},
	{"imageServiceEndpoint", Honoured, ""},
	{"failCgroupV1", Honoured, ""},
	{"userNamespaces.idsPerPod", NoEffect, "pods get no user namespaces"},
}

// FieldByPath returns the table entry for a JSON path.
func FieldByPath(path string) (Field, bool) {
	for _, f := range Fields {
		if f.Path == path {
			return f, true
		}
	}
	return Field{}, false
}
