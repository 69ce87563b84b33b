package kubelet

import (
	kubeletconfig "k8s.io/kubelet/config/v1beta1"

	"github.com/skiff-sh/skiff/internal/metrics"
)

// Config is everything the kubelet needs to run: the validated, defaulted
// KubeletConfiguration plus the flag-only settings upstream keeps outside it.
type Config struct {
	Kubelet  *kubeletconfig.KubeletConfiguration
	NodeName string // lowercased hostname or --hostname-override
	NodeIP   string // --node-ip, may be empty
	RootDir  string // --root-dir
	CertDir  string // --cert-dir; <RootDir>/pki when empty
	// DevicePluginDir is where device plugins register (--device-plugin-dir,
	// Skiff's own, for tests); upstream's fixed
	// /var/lib/kubelet/device-plugins when empty.
	DevicePluginDir     string
	Kubeconfig          string // --kubeconfig, may be empty (standalone)
	BootstrapKubeconfig string // --bootstrap-kubeconfig, may be empty
	// PodInfraContainerImage is --pod-infra-container-image: as upstream
	// 1.34, only kept from image garbage collection; the runtime runs
	// its own configured sandbox image.
	PodInfraContainerImage string
	// ExternalCloudProvider is --cloud-provider=external.
	ExternalCloudProvider bool
	// ImageCredentialProviderConfig and ImageCredentialProviderBinDir are
	// --image-credential-provider-config (a file or directory; empty: no
	// plugins) and --image-credential-provider-bin-dir.
	ImageCredentialProviderConfig string
	ImageCredentialProviderBinDir string
	// NodeLabels are added to the Node at registration (--node-labels).
	NodeLabels map[string]string
	// PodStartupBreakdownEvents emits one PodStartupBreakdown Event per pod
	// (--pod-startup-breakdown-events; Skiff's own, off by default).
	PodStartupBreakdownEvents bool
	// CPUProfile is --cpu-profile; cmd/skiff writes the profile, not Run.
	CPUProfile string
	// Metrics is what the kubelet records into and /metrics serves; nil:
	// a registry of its own.
	Metrics *metrics.Registry
	// ContainerLogsDir is where containers' log links go, upstream's
	// /var/log/containers (cmd/skiff sets it); empty: none are made.
	ContainerLogsDir string
}
