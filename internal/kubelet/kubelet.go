// Package kubelet wires Skiff together: pod sources feed the pod manager,
// whose changes go to the pod workers; PLEG events wake the workers; the
// workers sync pods through the runtime manager and record statuses, which
// the status manager reports to the apiserver and the server shows.
package kubelet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/admission"
	"github.com/skiff-sh/skiff/internal/certs"
	"github.com/skiff-sh/skiff/internal/cm"
	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/cri"
	"github.com/skiff-sh/skiff/internal/eviction"
	"github.com/skiff-sh/skiff/internal/images"
	"github.com/skiff-sh/skiff/internal/kube"
	"github.com/skiff-sh/skiff/internal/metrics"
	"github.com/skiff-sh/skiff/internal/nodestatus"
	"github.com/skiff-sh/skiff/internal/pleg"
	"github.com/skiff-sh/skiff/internal/podruntime"
	"github.com/skiff-sh/skiff/internal/podsource"
	"github.com/skiff-sh/skiff/internal/podsource/apiserver"
	"github.com/skiff-sh/skiff/internal/podsource/file"
	"github.com/skiff-sh/skiff/internal/podstartup"
	"github.com/skiff-sh/skiff/internal/podworker"
	"github.com/skiff-sh/skiff/internal/prober"
	"github.com/skiff-sh/skiff/internal/stats"
	"github.com/skiff-sh/skiff/internal/status"
	"github.com/skiff-sh/skiff/internal/statusmanager"
	"github.com/skiff-sh/skiff/internal/volume"
	"github.com/skiff-sh/skiff/internal/volume/payload"
)

const (
	plegPeriod         = time.Second
	housekeepingPeriod = 2 * time.Second
	defaultPodLogsDir  = "/var/log/pods"
	errorBackOffPeriod = 10 * time.Second
	// A cleaned-up pod's sandboxes are removed this long after (upstream's
	// container GC period; podruntime/removal.go says why not at once).
	sandboxRemovalDelay = time.Minute
)

// Kubelet is one running Skiff.
type Kubelet struct {
	cfg      Config
	cri      *cri.Client
	runtime  *podruntime.Manager
	cache    *container.Cache
	pleg     *pleg.PLEG
	workers  *podworker.Workers
	pods     *podManager
	statuses *status.Store
	hostIPs  []string
	sources  []string // names of the configured sources
	recorder podruntime.Recorder
	volumes  *volume.Manager
	startup  *podstartup.Tracker
	stats    *stats.Provider
	local    *admission.Local // node-local admission checks
	cgroups  *cm.Manager
	logsDir  string // podLogsDir: /var/log/pods
	prober   *prober.Manager

	// Cluster mode only; nil when standalone.
	client    kube.Interface
	statusMgr *statusmanager.Manager
	node      nodeInfo
	serving   *certs.Serving // serverTLSBootstrap's certificate; nil otherwise

	mu       sync.Mutex
	reasons  map[types.UID]map[string]*podruntime.ContainerError
	rejected map[types.UID]bool       // pods admission refused
	pending  map[types.UID]bool       // pods waiting for the Node before admission
	failed   map[types.UID]podFailure // pods Skiff failed (evicted, past their deadline)

	pressure atomic.Pointer[eviction.Pressure] // set once the eviction manager runs
}

// Run runs Skiff until ctx ends. Pods keep running when it returns: a
// restarted Skiff adopts them.
func Run(ctx context.Context, cfg Config) error {
	kc := cfg.Kubelet
	if cfg.Kubeconfig == "" && cfg.BootstrapKubeconfig != "" {
		return errors.New("--bootstrap-kubeconfig needs --kubeconfig: the path where the bootstrapped kubeconfig is written")
	}
	if err := os.MkdirAll(cfg.RootDir, 0o750); err != nil {
		return fmt.Errorf("create root directory: %w", err)
	}
	sysctls, err := admission.NewSysctls(kc.AllowedUnsafeSysctls)
	if err != nil {
		return err
	}
	cgroups, err := newCgroups(cfg)
	if err != nil {
		return err
	}
	client, err := cri.Dial(ctx, kc.ContainerRuntimeEndpoint, kc.ImageServiceEndpoint, kc.RuntimeRequestTimeout.Duration)
	if err != nil {
		return err
	}
	klog.InfoS("Connected to container runtime", "endpoint", kc.ContainerRuntimeEndpoint, "runtime", client.RuntimeName, "version", client.RuntimeVersion)
	if kc.PodCIDR != "" { // as upstream, in both modes; a Node's podCIDRs come later
		if err := nodestatus.SetRuntimePodCIDR(ctx, client.Runtime, kc.PodCIDR); err != nil {
			klog.ErrorS(err, "Pod CIDR update failed")
		}
	}

	metrics.SetNodeName(cfg.NodeName)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	k := &Kubelet{
		cfg:      cfg,
		cri:      client,
		cache:    container.NewCache(),
		pods:     newPodManager(),
		statuses: status.NewStore(),
		reasons:  map[types.UID]map[string]*podruntime.ContainerError{},
		rejected: map[types.UID]bool{},
		pending:  map[types.UID]bool{},
		failed:   map[types.UID]podFailure{},
		recorder: logRecorder{},
		local:    &admission.Local{Sysctls: sysctls, AppArmor: admission.AppArmorEnabled()},
		cgroups:  cgroups,
	}
	if k.hostIPs, err = nodestatus.HostIPs(ctx, splitIPs(cfg.NodeIP), cfg.NodeName); err != nil {
		klog.InfoS("Host IP unknown; pods report none", "err", err)
	}
	var creds *certs.Client
	if cfg.Kubeconfig != "" {
		if k.client, creds, err = newClient(ctx, cfg); err != nil {
			return err
		}
		k.recorder = newEventRecorder(ctx, k.client.CoreV1(), cfg)
		k.statusMgr = statusmanager.New(k.client.CoreV1(), k)
	}
	if k.startup, err = newStartupTracker(cfg, k.recorder); err != nil {
		return err
	}
	vc := volume.Config{RootDir: cfg.RootDir, Client: k.client, NodeAllocatable: k.allocatable}
	if k.client != nil {
		vc.Tokens = payload.New(k.client.CoreV1(), nil)
	}
	k.volumes = volume.New(vc)
	env, runServiceWatch := k.newEnv()
	logsDir := kc.PodLogsDir
	if logsDir == "" {
		logsDir = defaultPodLogsDir
	}
	k.logsDir = logsDir
	rc := podruntime.Config{
		CRI:        client,
		Recorder:   k.recorder,
		PauseImage: cfg.PodInfraContainerImage,
		PodLogsDir: logsDir,
		NodeIP:     first(k.hostIPs),
		DNS:        podruntime.DNS{ClusterDNS: kc.ClusterDNS, ClusterDomain: kc.ClusterDomain, ResolvConf: ptrOr(kc.ResolverConfig, "")},
		PodDir:     k.volumes.PodDir,
		Timer:      k.startup,
		Env:        env,
		Security: podruntime.Security{
			SeccompDefault: ptrOr(kc.SeccompDefault, false),
			SeccompRoot:    filepath.Join(cfg.RootDir, "seccomp"),
		},
		Resources: cgroups,
		Puller:    images.NewPuller(client.Images, ptrOr(kc.SerializeImagePulls, true), ptrOr(kc.MaxParallelImagePulls, 0)),

		SandboxRemovalDelay: sandboxRemovalDelay,
	}
	if k.client != nil {
		rc.PullSecrets = k.pullSecrets
	}
	k.prober = prober.New(ctx, prober.Config{Runtime: client.Runtime, Statuses: k.statuses, Recorder: k.recorder})
	rc.StartupDone = k.prober.StartupDone
	rc.Unhealthy = func(id string) (string, bool) {
		kind, failed := k.prober.Unhealthy(id)
		return strings.ToLower(string(kind)), failed
	}
	k.runtime = podruntime.New(rc)
	k.pleg = pleg.New(k.runtime, k.cache, plegPeriod)
	k.workers = podworker.New(ctx, podworker.Config{
		Handler: k, Cache: k.cache, Resync: kc.SyncFrequency.Duration, ErrorBackOff: errorBackOffPeriod,
	})

	var wg sync.WaitGroup
	defer wg.Wait()
	defer k.prober.Wait() // after the pod workers, which add probes
	defer k.workers.Wait()
	// An early return (a start-up error below) must end what was spawned
	// before the waits above, or they wait forever.
	defer cancel()
	spawn := func(f func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); f(ctx) }()
	}
	updates := make(chan podsource.Update, 16)
	if runServiceWatch != nil {
		spawn(runServiceWatch)
	}
	if kc.StaticPodPath != "" {
		k.sources = append(k.sources, podsource.File)
		src := file.New(file.Config{Path: kc.StaticPodPath, NodeName: cfg.NodeName, Period: kc.FileCheckFrequency.Duration})
		spawn(func(ctx context.Context) { src.Run(ctx, updates) })
	}
	if k.client != nil {
		spawn(creds.Run)
		if err := k.startNode(ctx, spawn); err != nil {
			return err
		}
		k.sources = append(k.sources, podsource.APIServer)
		spawn(func(ctx context.Context) {
			apiserver.Run(ctx, apiserver.Config{Client: k.client.CoreV1(), NodeName: cfg.NodeName}, updates)
		})
		spawn(k.statusMgr.Run)
	}
	spawn(k.pleg.Run)
	spawn(func(ctx context.Context) { k.runtime.RunSandboxRemover(ctx, housekeepingPeriod) })
	k.stats = stats.New(stats.Config{
		Runtime: client.Runtime, Images: client.Images, NodeName: cfg.NodeName,
		RootDir: cfg.RootDir, PodLogsDir: logsDir, VolumePeriod: kc.VolumeStatsAggPeriod.Duration,
		PodsCgroup: podsCgroup(kc),
	})
	spawn(k.stats.Run)
	spawn(k.runEviction)
	spawn(k.runLogRotation)
	if err := k.startServers(spawn, cancel); err != nil {
		return err
	}
	klog.InfoS("Skiff started", "node", cfg.NodeName, "standalone", k.client == nil, "staticPodPath", kc.StaticPodPath, "readOnlyPort", kc.ReadOnlyPort)
	k.syncLoop(ctx, updates)
	klog.InfoS("Skiff stopping; pods keep running")
	return nil
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// splitIPs splits --node-ip's comma-separated addresses.
func splitIPs(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
