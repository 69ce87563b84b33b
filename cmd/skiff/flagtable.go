package main

import (
	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/skiff-sh/skiff/internal/devicemanager"
)

// flagDef is one command-line flag: every flag of the upstream v1.34
// kubelet has one, plus Skiff's own. The table below is the only list of
// flags: --help, parsing and the tests all read it.
type flagDef struct {
	name string
	// field is the KubeletConfiguration JSON path the flag overrides; its
	// handling is the field's (config.Fields). Empty for flag-only
	// settings, which bind instead.
	field string
	// syntax picks upstream's value syntax for map and IP fields.
	syntax syntax
	// bind registers a flag-only setting on its options field.
	bind func(fs *pflag.FlagSet, o *options, name, usage string)
	// noEffect, for a flag-only setting Skiff does not implement, says
	// why; using the flag logs it as a warning.
	noEffect string
	// deprecated is upstream's deprecation message, printed on use.
	deprecated string
	usage      string
	skiffOnly  bool
}

type syntax int

const (
	plain       syntax = iota
	mapKV              // k=v,k=v
	mapKVNoSplt        // k=v,with,commas,k2=v
	mapLangle          // k<v,k<v
	ip                 // one IP address
	byLogsapi          // registered by component-base's logsapi.AddFlags
)

// Upstream's deprecation messages.
const (
	deprecatedConfigFlag = "This parameter should be set via the config file specified by the Kubelet's --config flag. See https://kubernetes.io/docs/tasks/administer-cluster/kubelet-config-file/ for more information."
	deprecatedGCFlag     = "Use --eviction-hard or --eviction-soft instead. Will be removed in a future version."
	deprecatedCadvisor   = "This is a cadvisor flag that was mistakenly registered with the Kubelet. Due to legacy concerns, it will follow the standard CLI deprecation timeline before being removed."
	deprecatedPauseImage = "will be removed in 1.35. Image garbage collector will get sandbox image information from CRI."
)

// Config flags upstream keeps undeprecated.
var currentConfigFlags = map[string]bool{
	"v": true, "vmodule": true, "log-flush-frequency": true, "provider-id": true, "fail-cgroupv1": true,
}

func str(get func(*options) *string, def string) func(*pflag.FlagSet, *options, string, string) {
	return func(fs *pflag.FlagSet, o *options, name, usage string) { fs.StringVar(get(o), name, def, usage) }
}

func boolean(get func(*options) *bool, def bool) func(*pflag.FlagSet, *options, string, string) {
	return func(fs *pflag.FlagSet, o *options, name, usage string) { fs.BoolVar(get(o), name, def, usage) }
}

// ignored accepts a value of upstream's type and keeps it nowhere.
func ignored(kind string) func(*pflag.FlagSet, *options, string, string) {
	return func(fs *pflag.FlagSet, _ *options, name, usage string) {
		switch kind {
		case "bool":
			fs.Bool(name, false, usage)
		case "duration":
			fs.Duration(name, 0, usage)
		case "int":
			fs.Int32(name, 0, usage)
		default:
			fs.String(name, "", usage)
		}
	}
}

const noCadvisor = "Skiff has no cAdvisor"

var flagTable = []flagDef{
	// Settings that live outside KubeletConfiguration (upstream's KubeletFlags).
	{name: "config", bind: str(func(o *options) *string { return &o.configFile }, ""), usage: "The KubeletConfiguration file to load. Command-line flags override it."},
	{name: "config-dir", bind: str(func(o *options) *string { return &o.configDir }, ""), usage: "A directory of drop-in KubeletConfiguration files (*.conf, in lexical order) merged over --config."},
	{name: "kubeconfig", bind: str(func(o *options) *string { return &o.kubeconfig }, ""), usage: "Path to a kubeconfig file for the apiserver. Without it Skiff runs standalone."},
	{name: "bootstrap-kubeconfig", bind: str(func(o *options) *string { return &o.bootstrapKubeconfig }, ""), usage: "Path to a kubeconfig used to get a client certificate (TLS bootstrap) when --kubeconfig does not exist."},
	{name: "hostname-override", bind: str(func(o *options) *string { return &o.hostnameOverride }, ""), usage: "If non-empty, the node name instead of the hostname."},
	{name: "node-ip", bind: str(func(o *options) *string { return &o.nodeIP }, ""), usage: "IP address (or two comma-separated dual-stack addresses) of the node."},
	{name: "cert-dir", bind: str(func(o *options) *string { return &o.certDir }, ""), usage: "The directory of the TLS certificates. Default: <root-dir>/pki."},
	{name: "cloud-provider", bind: str(func(o *options) *string { return &o.cloudProvider }, ""), usage: "The provider for cloud services. Set to empty string for running with no cloud provider. Set to 'external' for running with an external cloud provider."},
	{name: "root-dir", bind: str(func(o *options) *string { return &o.rootDir }, defaultRootDir), usage: "Directory path for managing kubelet files (volume mounts, etc)."},
	{name: "seccomp-default", bind: boolean(func(o *options) *bool { return &o.seccompDefault }, false), usage: "Use RuntimeDefault as the default seccomp profile (as the config field seccompDefault)."},
	{name: "node-labels", bind: func(fs *pflag.FlagSet, o *options, name, usage string) {
		labels := cliflag.ConfigurationMap(o.nodeLabels)
		fs.Var(&labels, name, usage)
	}, usage: "Labels to add when registering the node, as key=value pairs separated by ','. May be empty."},
	{name: "runtime-cgroups", bind: ignored("string"), noEffect: "the runtime is not moved to a cgroup", usage: "Cgroup to create and run the runtime in."},
	{name: "pod-infra-container-image", bind: str(func(o *options) *string { return &o.podInfraContainerImage }, ""), deprecated: deprecatedPauseImage, usage: "Specified image will not be pruned by the image garbage collector. CRI implementations have their own configuration to set this image."},
	{name: "image-credential-provider-config", bind: str(func(o *options) *string { return &o.imageCredentialProviderConfig }, ""), usage: "Path to a credential provider plugin config file (JSON/YAML/YML) or a directory of such files (merged in lexicographical order; non-recursive search)."},
	{name: "image-credential-provider-bin-dir", bind: str(func(o *options) *string { return &o.imageCredentialProviderBinDir }, ""), usage: "The path to the directory where credential provider plugin binaries are located."},
	{name: "lock-file", bind: ignored("string"), noEffect: "no lock file is taken", usage: "A file to use as a lock."},
	{name: "exit-on-lock-contention", bind: ignored("bool"), noEffect: "no lock file is taken", usage: "Exit on lock-file contention."},
	{name: "minimum-container-ttl-duration", bind: ignored("duration"), noEffect: "dead containers are removed as the pod's state says", deprecated: deprecatedGCFlag, usage: "Minimum age of a finished container before it is garbage collected."},
	{name: "maximum-dead-containers-per-container", bind: ignored("int"), noEffect: "dead containers are removed as the pod's state says", deprecated: deprecatedGCFlag, usage: "Old instances to retain per container."},
	{name: "maximum-dead-containers", bind: ignored("int"), noEffect: "dead containers are removed as the pod's state says", deprecated: deprecatedGCFlag, usage: "Old instances of containers to retain globally."},
	{name: "experimental-mounter-path", bind: ignored("string"), noEffect: "no mounter binary is used", deprecated: "will be removed in 1.25 or later. in favor of using CSI.", usage: "Path of a mounter binary."},
	{name: "experimental-allocatable-ignore-eviction", bind: ignored("bool"), noEffect: "hard eviction thresholds are always subtracted from allocatable", deprecated: "will be removed in 1.25 or later.", usage: "Ignore hard eviction thresholds in allocatable."},
	{name: "version", bind: func(fs *pflag.FlagSet, o *options, name, usage string) {
		fs.StringVar(&o.version, name, "false", usage)
		fs.Lookup(name).NoOptDefVal = "true"
	}, usage: "--version, --version=raw prints version information and quits."},
	{name: "housekeeping-interval", bind: ignored("duration"), noEffect: noCadvisor, usage: "cAdvisor's housekeeping interval."},

	// cAdvisor's flags, registered by mistake upstream and deprecated.
	{name: "application-metrics-count-limit", bind: ignored("int"), noEffect: noCadvisor, deprecated: deprecatedCadvisor},
	{name: "boot-id-file", bind: ignored("string"), noEffect: noCadvisor, deprecated: deprecatedCadvisor},
	{name: "container-hints", bind: ignored("string"), noEffect: noCadvisor, deprecated: deprecatedCadvisor},
	{name: "containerd", bind: ignored("string"), noEffect: noCadvisor, deprecated: deprecatedCadvisor},
	{name: "containerd-namespace", bind: ignored("string"), noEffect: noCadvisor, deprecated: deprecatedCadvisor},
	{name: "enable-load-reader", bind: ignored("bool"), noEffect: noCadvisor, deprecated: deprecatedCadvisor},
	{name: "event-storage-age-limit", bind: ignored("string"), noEffect: noCadvisor, deprecated: deprecatedCadvisor},
	{name: "event-storage-event-limit", bind: ignored("string"), noEffect: noCadvisor, deprecated: deprecatedCadvisor},
	{name: "global-housekeeping-interval", bind: ignored("duration"), noEffect: noCadvisor, deprecated: deprecatedCadvisor},
	{name: "log-cadvisor-usage", bind: ignored("bool"), noEffect: noCadvisor, deprecated: deprecatedCadvisor},
	{name: "machine-id-file", bind: ignored("string"), noEffect: noCadvisor, deprecated: deprecatedCadvisor},
	{name: "storage-driver-user", bind: ignored("string"), noEffect: noCadvisor, deprecated: deprecatedCadvisor},
	{name: "storage-driver-password", bind: ignored("string"), noEffect: noCadvisor, deprecated: deprecatedCadvisor},
	{name: "storage-driver-host", bind: ignored("string"), noEffect: noCadvisor, deprecated: deprecatedCadvisor},
	{name: "storage-driver-db", bind: ignored("string"), noEffect: noCadvisor, deprecated: deprecatedCadvisor},
	{name: "storage-driver-table", bind: ignored("string"), noEffect: noCadvisor, deprecated: deprecatedCadvisor},
	{name: "storage-driver-secure", bind: ignored("bool"), noEffect: noCadvisor, deprecated: deprecatedCadvisor},
	{name: "storage-driver-buffer-duration", bind: ignored("duration"), noEffect: noCadvisor, deprecated: deprecatedCadvisor},

	// KubeletConfiguration fields.
	{name: "enable-server", field: "enableServer"},
	{name: "fail-swap-on", field: "failSwapOn"},
	{name: "pod-manifest-path", field: "staticPodPath"},
	{name: "sync-frequency", field: "syncFrequency"},
	{name: "file-check-frequency", field: "fileCheckFrequency"},
	{name: "http-check-frequency", field: "httpCheckFrequency"},
	{name: "manifest-url", field: "staticPodURL"},
	{name: "manifest-url-header", field: "staticPodURLHeader"},
	{name: "address", field: "address", syntax: ip},
	{name: "port", field: "port"},
	{name: "read-only-port", field: "readOnlyPort"},
	{name: "fail-cgroupv1", field: "failCgroupV1"},
	{name: "container-runtime-endpoint", field: "containerRuntimeEndpoint"},
	{name: "image-service-endpoint", field: "imageServiceEndpoint"},
	{name: "anonymous-auth", field: "authentication.anonymous.enabled"},
	{name: "authentication-token-webhook", field: "authentication.webhook.enabled"},
	{name: "authentication-token-webhook-cache-ttl", field: "authentication.webhook.cacheTTL"},
	{name: "client-ca-file", field: "authentication.x509.clientCAFile"},
	{name: "authorization-mode", field: "authorization.mode"},
	{name: "authorization-webhook-cache-authorized-ttl", field: "authorization.webhook.cacheAuthorizedTTL"},
	{name: "authorization-webhook-cache-unauthorized-ttl", field: "authorization.webhook.cacheUnauthorizedTTL"},
	{name: "tls-cert-file", field: "tlsCertFile"},
	{name: "tls-private-key-file", field: "tlsPrivateKeyFile"},
	{name: "rotate-server-certificates", field: "serverTLSBootstrap"},
	{name: "tls-cipher-suites", field: "tlsCipherSuites"},
	{name: "tls-min-version", field: "tlsMinVersion"},
	{name: "rotate-certificates", field: "rotateCertificates"},
	{name: "registry-qps", field: "registryPullQPS"},
	{name: "registry-burst", field: "registryBurst"},
	{name: "event-qps", field: "eventRecordQPS"},
	{name: "event-burst", field: "eventBurst"},
	{name: "enable-debugging-handlers", field: "enableDebuggingHandlers"},
	{name: "contention-profiling", field: "enableContentionProfiling"},
	{name: "healthz-port", field: "healthzPort"},
	{name: "healthz-bind-address", field: "healthzBindAddress", syntax: ip},
	{name: "oom-score-adj", field: "oomScoreAdj"},
	{name: "cluster-domain", field: "clusterDomain"},
	{name: "volume-plugin-dir", field: "volumePluginDir"},
	{name: "cluster-dns", field: "clusterDNS"},
	{name: "streaming-connection-idle-timeout", field: "streamingConnectionIdleTimeout"},
	{name: "node-status-update-frequency", field: "nodeStatusUpdateFrequency"},
	{name: "minimum-image-ttl-duration", field: "imageMinimumGCAge"},
	{name: "image-gc-high-threshold", field: "imageGCHighThresholdPercent"},
	{name: "image-gc-low-threshold", field: "imageGCLowThresholdPercent"},
	{name: "volume-stats-agg-period", field: "volumeStatsAggPeriod"},
	{name: "feature-gates", field: "featureGates"},
	{name: "kubelet-cgroups", field: "kubeletCgroups"},
	{name: "system-cgroups", field: "systemCgroups"},
	{name: "provider-id", field: "providerID"},
	{name: "cgroups-per-qos", field: "cgroupsPerQOS"},
	{name: "cgroup-driver", field: "cgroupDriver"},
	{name: "cgroup-root", field: "cgroupRoot"},
	{name: "cpu-manager-policy", field: "cpuManagerPolicy"},
	{name: "cpu-manager-policy-options", field: "cpuManagerPolicyOptions", syntax: mapKVNoSplt},
	{name: "cpu-manager-reconcile-period", field: "cpuManagerReconcilePeriod"},
	{name: "qos-reserved", field: "qosReserved", syntax: mapKV},
	{name: "topology-manager-policy", field: "topologyManagerPolicy"},
	{name: "runtime-request-timeout", field: "runtimeRequestTimeout"},
	{name: "hairpin-mode", field: "hairpinMode"},
	{name: "max-pods", field: "maxPods"},
	{name: "pod-cidr", field: "podCIDR"},
	{name: "pod-max-pids", field: "podPidsLimit"},
	{name: "resolv-conf", field: "resolvConf"},
	{name: "runonce", field: "runOnce"},
	{name: "cpu-cfs-quota", field: "cpuCFSQuota"},
	{name: "cpu-cfs-quota-period", field: "cpuCFSQuotaPeriod"},
	{name: "enable-controller-attach-detach", field: "enableControllerAttachDetach"},
	{name: "make-iptables-util-chains", field: "makeIPTablesUtilChains"},
	{name: "container-log-max-size", field: "containerLogMaxSize"},
	{name: "container-log-max-files", field: "containerLogMaxFiles"},
	{name: "allowed-unsafe-sysctls", field: "allowedUnsafeSysctls"},
	{name: "node-status-max-images", field: "nodeStatusMaxImages"},
	{name: "kernel-memcg-notification", field: "kernelMemcgNotification"},
	{name: "local-storage-capacity-isolation", field: "localStorageCapacityIsolation"},
	{name: "max-open-files", field: "maxOpenFiles"},
	{name: "kube-api-content-type", field: "contentType"},
	{name: "kube-api-qps", field: "kubeAPIQPS"},
	{name: "kube-api-burst", field: "kubeAPIBurst"},
	{name: "serialize-image-pulls", field: "serializeImagePulls"},
	{name: "eviction-hard", field: "evictionHard", syntax: mapLangle},
	{name: "eviction-soft", field: "evictionSoft", syntax: mapLangle},
	{name: "eviction-soft-grace-period", field: "evictionSoftGracePeriod", syntax: mapKV},
	{name: "eviction-pressure-transition-period", field: "evictionPressureTransitionPeriod"},
	{name: "eviction-max-pod-grace-period", field: "evictionMaxPodGracePeriod"},
	{name: "eviction-minimum-reclaim", field: "evictionMinimumReclaim", syntax: mapKV},
	{name: "pods-per-core", field: "podsPerCore"},
	{name: "protect-kernel-defaults", field: "protectKernelDefaults"},
	{name: "reserved-cpus", field: "reservedSystemCPUs"},
	{name: "topology-manager-scope", field: "topologyManagerScope"},
	{name: "topology-manager-policy-options", field: "topologyManagerPolicyOptions", syntax: mapKV},
	{name: "system-reserved", field: "systemReserved", syntax: mapKV},
	{name: "kube-reserved", field: "kubeReserved", syntax: mapKV},
	{name: "enforce-node-allocatable", field: "enforceNodeAllocatable"},
	{name: "system-reserved-cgroup", field: "systemReservedCgroup"},
	{name: "kube-reserved-cgroup", field: "kubeReservedCgroup"},
	{name: "memory-manager-policy", field: "memoryManagerPolicy"},
	{name: "reserved-memory", field: "reservedMemory"},
	{name: "register-node", field: "registerNode"},
	{name: "register-with-taints", field: "registerWithTaints"},
	// component-base's logging flags, bound to the logging field.
	{name: "logging-format", field: "logging.format", syntax: byLogsapi},
	{name: "log-flush-frequency", field: "logging.flushFrequency", syntax: byLogsapi},
	{name: "v", field: "logging.verbosity", syntax: byLogsapi},
	{name: "vmodule", field: "logging.vmodule", syntax: byLogsapi},
	{name: "log-text-split-stream", field: "logging.options.text.splitStream", syntax: byLogsapi},
	{name: "log-text-info-buffer-size", field: "logging.options.text.infoBufferSize", syntax: byLogsapi},
	{name: "log-json-split-stream", field: "logging.options.json.splitStream", syntax: byLogsapi},
	{name: "log-json-info-buffer-size", field: "logging.options.json.infoBufferSize", syntax: byLogsapi},

	// Skiff's own.
	{name: "pod-startup-breakdown-events", skiffOnly: true, bind: boolean(func(o *options) *bool { return &o.podStartupBreakdownEvents }, false),
		usage: "Skiff only: emit one PodStartupBreakdown Event per pod when it first turns Ready, saying where its start-up time went."},
	{name: "cpu-profile", skiffOnly: true, bind: str(func(o *options) *string { return &o.cpuProfile }, ""),
		usage: "Skiff only: write a CPU profile (go tool pprof) of the whole run to this file; it is complete once Skiff exits."},
	{name: "device-plugin-dir", skiffOnly: true, bind: str(func(o *options) *string { return &o.devicePluginDir }, devicemanager.DefaultDir),
		usage: "Skiff only, for tests: the directory where device plugins register (kubelet.sock) and the device manager keeps its checkpoint. Device plugins look for upstream's fixed default whatever --root-dir says; change it only to keep several nodes on one machine apart."},
}
