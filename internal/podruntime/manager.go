// Package podruntime turns a pod spec into sandboxes and containers through
// CRI: it reads a pod's runtime status, decides what to start, restart or
// kill, and does it. It holds no per-pod state of its own beyond back-off
// timers; everything else is re-read from the runtime, so a restarted Skiff
// picks up where it left off.
package podruntime

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/cri"
	"github.com/skiff-sh/skiff/internal/envvars"
	"github.com/skiff-sh/skiff/internal/images"
	"github.com/skiff-sh/skiff/internal/metrics"
)

// Recorder emits Kubernetes Events; client-go's record.EventRecorder fits.
type Recorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

// Config configures a Manager.
type Config struct {
	CRI            *cri.Client
	Recorder       Recorder
	PodLogsDir     string // /var/log/pods
	RuntimeHandler string // CRI runtime handler; "" for the default
	DNS            DNS
	// PodDir is the directory of a pod's own files (its /etc/hosts).
	PodDir func(uid types.UID) string
	NodeIP string
	// Timer, if set, gets the duration of each start-up step.
	Timer Timer
	// Env computes containers' environments; nil: a standalone one
	// (no ConfigMaps, Secrets or Services).
	Env EnvSource
	// Security maps security contexts (seccomp defaults and profiles).
	Security Security
	// Resources places pods in cgroups; nil leaves that to the runtime.
	Resources Resources
	// Devices gives containers the devices device plugins allocated them;
	// nil: no device manager.
	Devices Devices
	// Actuation and PodResizer resize running containers in place to
	// the resources of the pod SyncPod gets (its allocated ones); nil:
	// containers keep what they started with.
	Actuation  Actuation
	PodResizer PodResizer
	// StartupDone reports whether the startup probe of the container with
	// that ID has succeeded; nil: no prober, running means started.
	StartupDone func(containerID string) bool
	// Unhealthy reports whether the running container with that ID failed
	// its liveness or startup probe, and which ("liveness", "startup"):
	// it is then killed and restarted as the restart policy says. nil: no
	// prober.
	Unhealthy func(containerID string) (probe string, failed bool)
	// Puller pulls images (serialized or parallel); nil: one at a time.
	Puller *images.Puller
	// PullSecrets returns a pod's imagePullSecrets; nil (standalone):
	// pulls are anonymous.
	PullSecrets func(ctx context.Context, pod *v1.Pod) []v1.Secret
	// CredentialProvider gives credentials for an image repository from
	// credential provider plugins, tried after the pull secrets' as
	// upstream's keyring does; nil: none configured.
	CredentialProvider CredentialProvider
	// SandboxRemovalDelay defers removing a cleaned-up pod's sandboxes to
	// RunSandboxRemover (removal.go); 0 removes them at once.
	SandboxRemovalDelay time.Duration
	// CrashBackOffInitial and CrashBackOffMax are the container restart
	// back-off (config.CrashLoopBackOff); upstream's 10 s and 300 s when 0.
	CrashBackOffInitial, CrashBackOffMax time.Duration
	// Clock times back-offs, hooks, start-up steps and sandbox removal;
	// nil: the real one.
	Clock clock.WithTicker
	// Metrics counts pods and containers started and times image pulls;
	// nil: a registry of its own.
	Metrics *metrics.Registry
	// LogLinks links started containers' logs into /var/log/containers
	// and removes the links with the containers; nil: no links.
	LogLinks LogLinks
}

// EnvSource computes a container's environment; *envvars.Builder fits.
type EnvSource interface {
	Env(ctx context.Context, pod *v1.Pod, c *v1.Container, podIPs []string) ([]v1.EnvVar, error)
}

// Resources gives a pod's sandbox its cgroup parent and its containers
// their CRI resources.
type Resources interface {
	PodCgroupParent(pod *v1.Pod) string
	ContainerResources(pod *v1.Pod, c *v1.Container) *runtimeapi.LinuxContainerResources
}

// Devices gives a container what device plugins allocated it: the
// envs, mounts, devices, annotations and CDI devices of a CRI container
// config (the other fields unset); nil when it has none.
type Devices interface {
	RunOptions(ctx context.Context, pod *v1.Pod, c *v1.Container) (*runtimeapi.ContainerConfig, error)
}

// Manager syncs pods against the runtime.
type Manager struct {
	cfg          Config
	crashBackOff *flowcontrol.Backoff // container restarts
	pullBackOff  *flowcontrol.Backoff // image pulls
	pullErrs     sync.Map             // back-off key → last pull error, for the ImagePullBackOff message
	removals     removalQueue         // sandboxes of cleaned-up pods
}

// Upstream back-off: 10 s doubling to 300 s, reset after a container has
// run for twice the maximum.
const (
	backOffInitial = 10 * time.Second
	backOffMax     = 300 * time.Second
)

// New returns a Manager.
func New(cfg Config) *Manager {
	if cfg.Env == nil {
		var hostIPs []string
		if cfg.NodeIP != "" {
			hostIPs = []string{cfg.NodeIP}
		}
		cfg.Env = envvars.New(envvars.Config{HostIPs: hostIPs})
	}
	if cfg.Puller == nil && cfg.CRI != nil {
		cfg.Puller = images.NewPuller(cfg.CRI.Images, true, 0)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New()
	}
	if cfg.LogLinks == nil {
		cfg.LogLinks = noLinks{}
	}
	crashInitial, crashMax := cfg.CrashBackOffInitial, cfg.CrashBackOffMax
	if crashInitial <= 0 || crashMax <= 0 {
		crashInitial, crashMax = backOffInitial, backOffMax
	}
	return &Manager{
		cfg: cfg,
		// NewFakeBackOff is client-go's only constructor taking a clock.
		crashBackOff: flowcontrol.NewFakeBackOff(crashInitial, crashMax, cfg.Clock),
		pullBackOff:  flowcontrol.NewFakeBackOff(backOffInitial, backOffMax, cfg.Clock),
	}
}

// GC drops back-off entries that have long expired.
func (m *Manager) GC() {
	m.crashBackOff.GC()
	m.pullBackOff.GC()
	m.gcPullErrors()
}
