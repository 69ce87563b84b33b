// Package kubelet wires Skiff together: pod sources feed the pod manager,
// whose changes go to the pod workers; PLEG events wake the workers; the
// workers sync pods through the runtime manager and record statuses, which
// the status manager keeps, reports to the apiserver and the server shows.
//
// New builds the whole machine from its dependencies (a CRI client, an
// apiserver client or none, a clock, the filesystem roots) and Run runs
// it, so tests drive it in-process over fakes. Each pod has one record
// (records.go) and a list of per-pod hooks (hooks.go) set up in order
// before it runs and torn down in reverse, in one place, once nothing of
// it runs.
package kubelet

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/admission"
	"github.com/skiff-sh/skiff/internal/certs"
	"github.com/skiff-sh/skiff/internal/config"
	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/cri"
	"github.com/skiff-sh/skiff/internal/devicemanager"
	"github.com/skiff-sh/skiff/internal/dra"
	"github.com/skiff-sh/skiff/internal/images"
	"github.com/skiff-sh/skiff/internal/kube"
	"github.com/skiff-sh/skiff/internal/loglinks"
	"github.com/skiff-sh/skiff/internal/metrics"
	"github.com/skiff-sh/skiff/internal/pleg"
	"github.com/skiff-sh/skiff/internal/pluginwatcher"
	"github.com/skiff-sh/skiff/internal/podruntime"
	"github.com/skiff-sh/skiff/internal/podsource"
	"github.com/skiff-sh/skiff/internal/podstartup"
	"github.com/skiff-sh/skiff/internal/podworker"
	"github.com/skiff-sh/skiff/internal/prober"
	"github.com/skiff-sh/skiff/internal/shutdown"
	"github.com/skiff-sh/skiff/internal/stats"
	"github.com/skiff-sh/skiff/internal/statusmanager"
	"github.com/skiff-sh/skiff/internal/volume"
	"github.com/skiff-sh/skiff/internal/volume/csi"
	"github.com/skiff-sh/skiff/internal/volumemanager"
)

const (
	defaultPodLogsDir  = "/var/log/pods"
	errorBackOffPeriod = 10 * time.Second
)

// Deps is what New builds Skiff from. Config's RootDir, the configured
// PodLogsDir and staticPodPath are the filesystem roots.
type Deps struct {
	Config Config
	// CRI is the runtime and image service (k8s.io/cri-api's fakes fit).
	CRI *cri.Client
	// Client talks to the apiserver; nil runs standalone.
	Client kube.Interface
	// Heartbeat renews the Lease and posts the node status; Reviews makes
	// the kubelet API's TokenReviews and SubjectAccessReviews; Events
	// sends Events. All are clients on Client's transport with rate limits
	// of their own; nil: Client.
	Heartbeat, Reviews, Events kube.Interface
	// Creds renews Client's certificate; nil when nothing rotates.
	Creds *certs.Client
	// Logind reaches systemd-logind for graceful node shutdown; nil:
	// through the system bus (shutdown.ConnectLogind).
	Logind func(ctx context.Context) (shutdown.Logind, error)
	// Clock times PLEG, the pod workers, the prober, status reports, the
	// runtime manager, eviction, image GC and start-up tracking; nil: the
	// real one.
	Clock clock.WithTicker
	// Cgroups places pods in cgroups (*podcgroups.Manager).
	Cgroups PodCgroups
	// HostIPs are the node's addresses, the pods' hostIPs.
	HostIPs []string
	// Periods; zero values are the production ones.
	Periods Periods
}

// Periods are the kubelet's loop periods.
type Periods struct {
	PLEG         time.Duration // relist: 1 s
	Housekeeping time.Duration // orphans, admission retries: 2 s
	StatusSync   time.Duration // status retries: 10 s
	// SandboxRemoval is how long after clean-up a pod's sandboxes are
	// removed: upstream's container GC period, 1 min (podruntime/removal.go
	// says why not at once).
	SandboxRemoval time.Duration
}

func (p Periods) withDefaults() Periods {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&p.PLEG, time.Second)
	def(&p.Housekeeping, 2*time.Second)
	def(&p.StatusSync, 10*time.Second)
	def(&p.SandboxRemoval, time.Minute)
	return p
}

// Kubelet is one Skiff. Per-pod state lives in the pod records, the pod
// workers and the status manager, never in maps of its own.
type Kubelet struct {
	cfg     Config
	periods Periods
	clock   clock.WithTicker
	cri     *cri.Client
	runtime *podruntime.Manager
	cache   *container.Cache
	pleg    *pleg.PLEG
	workers *podworker.Workers
	pods    *podManager
	records *podRecords
	hooks   []podHook
	// statuses holds every pod's latest status and reports it when a
	// cluster is there.
	statuses *statusmanager.Manager
	hostIPs  []string
	sources  []string // names of the configured sources
	recorder podruntime.Recorder
	volumes  *volume.Manager
	// volumeManager sets up and tears down pods' volumes (of volumes).
	volumeManager *volumemanager.Manager
	plugins       *pluginwatcher.Watcher // registers CSI and DRA drivers
	csiDrivers    *csi.Drivers           // also says which volumes are in use
	startup       *podstartup.Tracker
	stats         *stats.Provider
	local         *admission.Local // node-local admission checks
	cgroups       PodCgroups
	logsDir       string          // podLogsDir: /var/log/pods
	logLinks      *loglinks.Links // /var/log/containers; nil: none
	prober        *prober.Manager
	cluster       cluster // the apiserver side; does nothing standalone
	eviction      evictionManagers
	shutdown      *shutdown.Manager // graceful node shutdown
	devices       *devicemanager.Manager
	dra           *dra.Manager // prepares pods' ResourceClaims
	draWiper      *dra.Wiper   // wipes gone drivers' ResourceSlices; nil: none
	resize        *inPlaceResize
}

// New builds Skiff from its dependencies; nothing runs until Run.
func New(d Deps) (*Kubelet, error) {
	kc := d.Config.Kubelet
	if d.CRI == nil || d.Cgroups == nil || kc == nil {
		return nil, errors.New("kubelet: New needs the CRI client, the pod cgroups and the kubelet configuration")
	}
	if d.Clock == nil {
		d.Clock = clock.RealClock{}
	}
	if d.Config.Metrics == nil {
		d.Config.Metrics = metrics.New()
	}
	d.Config.Metrics.SetNodeName(d.Config.NodeName)
	cfg := d.Config
	sysctls, err := admission.NewSysctls(kc.AllowedUnsafeSysctls)
	if err != nil {
		return nil, err
	}
	k := &Kubelet{
		cfg: cfg, periods: d.Periods.withDefaults(), clock: d.Clock, cri: d.CRI,
		cache: container.NewCache(), pods: newPodManager(), records: newPodRecords(),
		hostIPs: d.HostIPs, recorder: logRecorder{}, cgroups: d.Cgroups,
		local:   &admission.Local{Sysctls: sysctls, AppArmor: admission.AppArmorEnabled()},
		logsDir: kc.PodLogsDir,
	}
	if k.logsDir == "" {
		k.logsDir = defaultPodLogsDir
	}
	if cfg.ContainerLogsDir != "" {
		if k.logLinks, err = loglinks.Open(cfg.ContainerLogsDir, k.logsDir); err != nil {
			return nil, err
		}
	}
	draDrivers, err := k.newDeviceManagers(d.Client)
	if err != nil {
		return nil, err
	}
	if err := k.newCluster(d); err != nil {
		return nil, err
	}
	if k.shutdown, err = k.newShutdown(d.Logind); err != nil {
		return nil, err
	}
	if k.resize, err = k.newResize(); err != nil {
		return nil, err
	}
	k.startup = newStartupTracker(cfg, k.recorder, d.Clock)
	tokens := newTokens(d.Client)
	csiDrivers := k.newCSIDrivers(d.Client, tokens)
	k.volumes, k.volumeManager = k.newVolumes(d.Client, csiDrivers, tokens)
	k.plugins = k.newPlugins(csiDrivers, draDrivers)
	k.prober = prober.New(prober.Config{Runtime: d.CRI.Runtime, Statuses: k.statuses, Recorder: k.recorder, Clock: d.Clock,
		Metrics: cfg.Metrics})
	rc := k.runtimeConfig()
	if rc.CredentialProvider, err = credentialProviders(cfg); err != nil {
		return nil, err
	}
	k.runtime = podruntime.New(rc)
	k.pleg = pleg.New(pleg.Config{Runtime: k.runtime, Cache: k.cache, Period: k.periods.PLEG, Clock: d.Clock,
		Events: d.CRI.Runtime, Metrics: cfg.Metrics})
	k.workers = podworker.New(podworker.Config{
		Handler: k, Cache: k.cache, Resync: kc.SyncFrequency.Duration, ErrorBackOff: errorBackOffPeriod, Clock: d.Clock,
	})
	k.stats = stats.New(stats.Config{
		Runtime: d.CRI.Runtime, Images: d.CRI.Images, NodeName: cfg.NodeName,
		RootDir: cfg.RootDir, PodLogsDir: k.logsDir, VolumePeriod: kc.VolumeStatsAggPeriod.Duration,
		PodsCgroup: podsCgroup(kc), CSI: csiDrivers, PodVolumes: k.podVolumeRefs,
	})
	cfg.Metrics.SetVolumeStats(k.stats.VolumeStatsCollector())
	if kc.StaticPodPath != "" {
		k.sources = append(k.sources, podsource.File)
	}
	if kc.StaticPodURL != "" {
		k.sources = append(k.sources, podsource.HTTP)
	}
	k.sources = append(k.sources, k.cluster.sources()...)
	k.eviction = k.newEvictionManagers()
	k.hooks = k.podHooks()
	return k, nil
}

// runtimeConfig configures the runtime manager.
func (k *Kubelet) runtimeConfig() podruntime.Config {
	kc := k.cfg.Kubelet
	nodeIP := ""
	if len(k.hostIPs) > 0 {
		nodeIP = k.hostIPs[0]
	}
	rc := podruntime.Config{
		CRI:        k.cri,
		Recorder:   k.recorder,
		PodLogsDir: k.logsDir,
		NodeIP:     nodeIP,
		DNS:        podruntime.DNS{ClusterDNS: kc.ClusterDNS, ClusterDomain: kc.ClusterDomain, ResolvConf: ptr.Deref(kc.ResolverConfig, "")},
		PodDir:     k.volumes.PodDir,
		Timer:      k.startup,
		Env:        k.cluster.env(k.hostIPs, k.allocatable),
		Security: podruntime.Security{
			SeccompDefault: ptr.Deref(kc.SeccompDefault, false),
			SeccompRoot:    filepath.Join(k.cfg.RootDir, "seccomp"),
		},
		Resources:   k.cgroups,
		Devices:     containerDevices{plugins: k.devices, dra: k.dra},
		Puller:      images.NewPuller(k.cri.Images, ptr.Deref(kc.SerializeImagePulls, true), ptr.Deref(kc.MaxParallelImagePulls, 0)),
		PullSecrets: k.cluster.pullSecrets(),
		StartupDone: k.prober.StartupDone,
		Unhealthy: func(id string) (string, bool) {
			kind, failed := k.prober.Unhealthy(id)
			return strings.ToLower(string(kind)), failed
		},
		SandboxRemovalDelay: k.periods.SandboxRemoval,
		Clock:               k.clock,
		Metrics:             k.cfg.Metrics,
	}
	if k.logLinks != nil {
		rc.LogLinks = k.logLinks
	}
	rc.CrashBackOffInitial, rc.CrashBackOffMax = config.CrashLoopBackOff(kc)
	k.wireResize(&rc)
	return rc
}

// Run runs Skiff until ctx ends. Pods keep running when it returns: a
// restarted Skiff adopts them.
func (k *Kubelet) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	// An early return (a start-up error below) must end what was spawned
	// before the wait above, or it waits forever.
	defer cancel()
	spawn := func(f func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); f(ctx) }()
	}
	spawn(k.workers.Run)
	spawn(k.volumeManager.Run)
	spawn(k.runPlugins)
	spawn(k.runDRA)
	spawn(k.prober.Run)
	updates := make(chan podsource.Update, 16)
	if err := k.cluster.run(ctx, spawn, updates); err != nil {
		return err
	}
	k.runSources(spawn, updates)
	spawn(k.pleg.Run)
	spawn(k.logRuntimeFeatures)
	spawn(func(ctx context.Context) { k.runtime.RunSandboxRemover(ctx, k.periods.Housekeeping) })
	spawn(k.stats.Run)
	spawn(k.runEviction)
	spawn(k.runLogRotation)
	spawn(k.shutdown.Run)
	spawn(k.reconcileLogLinks)
	if err := k.runDevices(spawn); err != nil {
		return err
	}
	if err := k.startServers(spawn, cancel); err != nil {
		return err
	}
	kc := k.cfg.Kubelet
	klog.InfoS("Skiff started", "node", k.cfg.NodeName, "standalone", k.cluster.standalone(), "staticPodPath", kc.StaticPodPath, "readOnlyPort", kc.ReadOnlyPort)
	k.syncLoop(ctx, updates)
	klog.InfoS("Skiff stopping; pods keep running")
	return nil
}

// splitIPs splits --node-ip's comma-separated addresses.
func splitIPs(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
