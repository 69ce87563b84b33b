// Package stats serves the kubelet's resource statistics: the summary API
// (k8s.io/kubelet/pkg/apis/stats/v1alpha1) and the Prometheus
// /metrics/resource that metrics-server scrapes. CPU and memory are sampled
// every Period, like cadvisor's housekeeping, so CPU rates (usageNanoCores)
// come from two samples; volume and log sizes are walked every VolumePeriod,
// never per request.
package stats

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	internalapi "k8s.io/cri-api/pkg/apis"
	"k8s.io/klog/v2"
)

// Config configures a Provider.
type Config struct {
	Runtime    internalapi.RuntimeService
	Images     internalapi.ImageManagerService
	NodeName   string
	RootDir    string // --root-dir: the node fs, and pod volumes under RootDir/pods
	PodLogsDir string // /var/log/pods
	// Period is how often CPU and memory are sampled (default 10 s);
	// VolumePeriod how often volumes and logs are walked (default 1 min).
	Period, VolumePeriod time.Duration
	// CgroupRoot and ProcRoot default to /sys/fs/cgroup and /proc.
	CgroupRoot, ProcRoot string
	// PodsCgroup is the cgroup of all pods (e.g. /kubepods), shown as the
	// "pods" system container; none when empty.
	PodsCgroup string
	// SysRoot and EtcRoot default to /sys and /etc: the machine's identity
	// and block device names for /metrics/cadvisor.
	SysRoot, EtcRoot string
	// CSI tells the usage of CSI volumes, which are not walked; PodVolumes
	// lists a pod's volumes by host path, to name them and their claims.
	// Without both, CSI volumes are left out.
	CSI        CSIStats
	PodVolumes func(uid types.UID) map[string]VolumeRef
}

// Provider samples the node and its pods and builds summaries.
type Provider struct {
	cfg  Config
	host host
	now  func() time.Time

	sampleMu     sync.Mutex // one sample at a time
	sbInfo       map[string]sandboxInfo
	prev         map[string]cpuPoint // last CPU readings, for rates
	sbStatsOff   time.Time           // ListPodSandboxStats failed: skip it until then
	sbStatsRetry time.Duration       // the last wait after a failure, 0 after a success
	ctrInfo      map[string]ctrInfo  // by container ID, for /metrics/cadvisor
	// cadvisorAsked is when /metrics/cadvisor was last scraped (Unix
	// nanoseconds): samples read its cgroup figures only while it is.
	cadvisorAsked atomic.Int64

	machineOnce sync.Once
	machineInfo machineInfo
	devices     deviceNames

	mu   sync.RWMutex
	snap *snapshot
	disk *diskUsage
}

// New returns a Provider; Run starts its sampling.
func New(cfg Config) *Provider {
	if cfg.Period <= 0 {
		cfg.Period = 10 * time.Second
	}
	if cfg.VolumePeriod <= 0 {
		cfg.VolumePeriod = time.Minute
	}
	if cfg.CgroupRoot == "" {
		cfg.CgroupRoot = "/sys/fs/cgroup"
	}
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}
	if cfg.SysRoot == "" {
		cfg.SysRoot = "/sys"
	}
	if cfg.EtcRoot == "" {
		cfg.EtcRoot = "/etc"
	}
	return &Provider{
		cfg:     cfg,
		host:    host{cg: detectCgroups(cfg.CgroupRoot), proc: cfg.ProcRoot},
		now:     time.Now,
		sbInfo:  map[string]sandboxInfo{},
		prev:    map[string]cpuPoint{},
		ctrInfo: map[string]ctrInfo{},
		devices: deviceNames{sys: cfg.SysRoot},
	}
}

// machine is the machine's info, read at first use.
func (p *Provider) machine() *machineInfo {
	p.machineOnce.Do(func() { p.machineInfo = readMachine(p.cfg.ProcRoot, p.cfg.SysRoot, p.cfg.EtcRoot) })
	return &p.machineInfo
}

// Run samples until ctx ends.
func (p *Provider) Run(ctx context.Context) {
	klog.InfoS("Sampling resource usage", "period", p.cfg.Period, "volumePeriod", p.cfg.VolumePeriod, "cgroupV2", p.host.cg.v2)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		every(ctx, p.cfg.VolumePeriod, p.walkDisk)
	}()
	every(ctx, p.cfg.Period, func(ctx context.Context) {
		if err := p.Sample(ctx); err != nil {
			klog.ErrorS(err, "Sampling resource usage failed")
		}
	})
}

func every(ctx context.Context, period time.Duration, f func(context.Context)) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		f(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// snapshot is one sample of everything CPU and memory.
type snapshot struct {
	t        time.Time
	node     cpuMem
	nodeRate *uint64
	nodeErr  error
	bootTime time.Time
	memCap   uint64
	imageFs  *fsSample
	// containerFs holds the containers' writable layers: the runtime's
	// ContainerFilesystems when it reports them apart, else imageFs.
	containerFs *fsSample
	defaultNIC  string
	pods        map[types.UID]*podSample
	// cadvisor is the same, as cAdvisor shows them; withCadvisor tells
	// whether it was read (a sample reads it only while it is scraped).
	cadvisor     []*cadvisorEntity
	withCadvisor bool
}

// cpuPoint is a cumulative CPU reading at a time.
type cpuPoint struct {
	t     time.Time
	nanos uint64
}

// rate is the CPU use in nanocores between the last reading of key and
// now, nil for a first reading or a counter that went back (a restart).
func (p *Provider) rate(next map[string]cpuPoint, key string, now cpuPoint) *uint64 {
	next[key] = now
	last, ok := p.prev[key]
	if !ok || now.nanos < last.nanos || !now.t.After(last.t) {
		return nil
	}
	r := uint64(float64(now.nanos-last.nanos) / float64(now.t.Sub(last.t).Nanoseconds()) * 1e9)
	return &r
}
