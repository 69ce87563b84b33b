package config

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// Values upstream keeps in k8s.io/kubernetes packages that Skiff may not
// import; copied here with their upstream meaning.
const (
	DefaultKubeletPort              = 10250
	DefaultHealthzPort              = 10248
	DefaultOOMScoreAdj              = -999 // qos.KubeletOOMScoreAdj
	DefaultResolvConf               = "/etc/resolv.conf"
	DefaultIPTablesMasqueradeBit    = 14
	DefaultIPTablesDropBit          = 15
	DefaultVolumePluginDir          = "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/"
	DefaultPodLogsDir               = "/var/log/pods"
	DefaultMemoryThrottlingFactor   = 0.9
	DefaultContainerRuntimeEndpoint = "unix:///run/containerd/containerd.sock"
	// DefaultMaxContainerRestartPeriod is the crash-loop back-off cap.
	DefaultMaxContainerRestartPeriod = 300 * time.Second
)

// Feature gates whose state changes defaulting or validation. All are off by
// default in Kubernetes 1.34, so only an explicit featureGates entry turns
// them on.
const (
	gateCrashLoopBackOffMax          = "KubeletCrashLoopBackOffMax"
	gateEnsureSecretPulledImages     = "KubeletEnsureSecretPulledImages"
	gateCustomCPUCFSQuotaPeriod      = "CustomCPUCFSQuotaPeriod"
	gateMemoryQoS                    = "MemoryQoS"
	gateNodeLogQuery                 = "NodeLogQuery"
	defaultCPUCFSQuotaPeriodDuration = 100 * time.Millisecond
)

// DefaultEvictionHard returns the Linux hard eviction thresholds the kubelet
// uses when evictionHard is not set. A fresh map each call, so callers may
// modify it.
func DefaultEvictionHard() map[string]string {
	return map[string]string{
		"memory.available":  "100Mi",
		"nodefs.available":  "10%",
		"nodefs.inodesFree": "5%",
		"imagefs.available": "15%",
	}
}

// DefaultEnforceNodeAllocatable is the default enforceNodeAllocatable list.
func DefaultEnforceNodeAllocatable() []string { return []string{"pods"} }

var zeroDuration = metav1.Duration{}

func gateEnabled(c *kubeletconfigv1beta1.KubeletConfiguration, gate string) bool {
	return c.FeatureGates[gate]
}
