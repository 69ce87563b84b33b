// Package podcgroups manages the QoS cgroup hierarchy as the upstream kubelet lays
// it out: kubepods below the cgroupRoot for all pods (limited to node
// allocatable), burstable and besteffort below it, and one cgroup per pod
// under its QoS class (Guaranteed pods directly under kubepods). The
// runtime puts a pod's containers under its pod cgroup, which carries the
// pod's CPU and memory limits.
//
// With the cgroupfs driver Skiff writes the cgroups itself
// (<cgroupRoot>/kubepods/burstable/pod<uid>); with the systemd driver they
// are slices that systemd makes (kubepods.slice,
// kubepods-burstable.slice, kubepods-burstable-pod<uid>.slice with the
// UID's "-" as "_").
package podcgroups

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/qos"
)

// Config configures a Manager; New validates it.
type Config struct {
	// Root is where the cgroup filesystems are mounted: /sys/fs/cgroup.
	Root string
	// CgroupRoot is the config's cgroupRoot: the parent of kubepods.
	CgroupRoot string
	// PerQOS is the config's cgroupsPerQOS; without it pods get no cgroups
	// of their own and run under CgroupRoot.
	PerQOS bool
	// Driver is the cgroup driver: cgroupfs (the default) or systemd.
	Driver string
	// EnforcePods: enforceNodeAllocatable contains "pods", so kubepods is
	// limited to capacity minus the reserved resources.
	EnforcePods bool
	Capacity    v1.ResourceList
	Reserved    v1.ResourceList // systemReserved + kubeReserved
	// CPUCFSQuota enforces CPU limits; CPUCFSQuotaPeriod is their period.
	CPUCFSQuota       bool
	CPUCFSQuotaPeriod time.Duration
	PodPidsLimit      int64 // <= 0: none
	// Rmdir removes one empty cgroup; tests use a plain directory removal.
	Rmdir func(string) error
}

// Manager creates, configures and removes pod cgroups.
type Manager struct {
	cfg            Config
	fs             cgroupFS
	root           cgroupName // the cgroupRoot's levels
	swapAccounting bool

	mu        sync.Mutex
	burstable map[types.UID]int64 // CPU requests (milli) of Burstable pods
}

// New checks the configuration against the host's cgroups.
func New(cfg Config) (*Manager, error) {
	if cfg.CgroupRoot == "" {
		cfg.CgroupRoot = "/"
	}
	if !path.IsAbs(cfg.CgroupRoot) {
		return nil, fmt.Errorf("cgroupRoot %q must be an absolute path", cfg.CgroupRoot)
	}
	if cfg.Rmdir == nil {
		cfg.Rmdir = syscall.Rmdir
	}
	root := parseCgroupfs(cfg.CgroupRoot)
	var fs cgroupFS
	var err error
	switch cfg.Driver {
	case "", DriverCgroupfs:
		cfg.Driver = DriverCgroupfs
		fs, err = detect(cfg.Root, cfg.Rmdir)
	case DriverSystemd:
		if err = checkSystemdRoot(root); err == nil {
			fs, err = newSystemdFS(cfg.Root)
		}
	default:
		err = fmt.Errorf("cgroupDriver %q is not supported: use cgroupfs or systemd", cfg.Driver)
	}
	if err != nil {
		return nil, err
	}
	return withFS(cfg, fs, root), nil
}

func withFS(cfg Config, fs cgroupFS, root cgroupName) *Manager {
	m := &Manager{cfg: cfg, fs: fs, root: root, burstable: map[types.UID]int64{}}
	m.swapAccounting = fs.hasFile("memory", "/", "memory.memsw.limit_in_bytes")
	return m
}

// Version is 1 or 2, the cgroup version in use.
func (m *Manager) Version() int { return m.fs.version() }

// path is a cgroup's path below the hierarchies' mounts with the driver in
// use: /kubepods/burstable or /kubepods.slice/kubepods-burstable.slice.
func (m *Manager) path(n cgroupName) string {
	if m.cfg.Driver != DriverSystemd {
		return n.cgroupfs()
	}
	p, err := n.systemd()
	if err != nil { // New checked the root; pod UIDs have no empty levels
		klog.ErrorS(err, "Cannot name a systemd slice", "cgroup", n.cgroupfs())
		return n.cgroupfs()
	}
	return p
}

// kubepods is the cgroup of all pods.
func (m *Manager) kubepods() string { return m.path(m.qosName(v1.PodQOSGuaranteed)) }

func (m *Manager) qosName(class v1.PodQOSClass) cgroupName {
	kubepods := m.root.child("kubepods")
	switch class {
	case v1.PodQOSBurstable:
		return kubepods.child("burstable")
	case v1.PodQOSBestEffort:
		return kubepods.child("besteffort")
	}
	return kubepods
}

func (m *Manager) qosCgroup(class v1.PodQOSClass) string { return m.path(m.qosName(class)) }

func (m *Manager) podCgroup(class v1.PodQOSClass, uid types.UID) string {
	return m.path(m.qosName(class).child("pod" + string(uid)))
}

// PodCgroupParent is the cgroup CRI gets as the sandbox's cgroup_parent:
// the pod cgroup, or the cgroupRoot without per-QoS cgroups ("" for /).
// With the systemd driver it is the slice's path, as upstream hands it
// (/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<uid>.slice);
// the runtime makes its containers scopes in the last slice.
func (m *Manager) PodCgroupParent(pod *v1.Pod) string {
	if !m.cfg.PerQOS {
		if len(m.root) == 0 {
			return ""
		}
		return m.path(m.root)
	}
	return m.podCgroup(qos.Class(pod), pod.UID)
}

// Start creates kubepods and the QoS cgroups and limits kubepods to what
// pods may use.
func (m *Manager) Start() error {
	if !m.cfg.PerQOS {
		return nil
	}
	for _, name := range []string{m.kubepods(), m.qosCgroup(v1.PodQOSBurstable), m.qosCgroup(v1.PodQOSBestEffort)} {
		if err := m.fs.create(name); err != nil {
			return fmt.Errorf("create cgroup %s: %w", name, err)
		}
	}
	alloc := v1.ResourceList{}
	for name, c := range m.cfg.Capacity {
		c = c.DeepCopy()
		if r, ok := m.cfg.Reserved[name]; ok {
			c.Sub(r)
		}
		alloc[name] = c
	}
	shares := MilliCPUToShares(alloc.Cpu().MilliValue())
	top := Limits{CPUShares: &shares}
	if mem := alloc.Memory().Value(); m.cfg.EnforcePods && mem > 0 {
		top.Memory = &mem
	}
	if err := m.fs.apply(m.kubepods(), top); err != nil {
		return fmt.Errorf("configure %s: %w", m.kubepods(), err)
	}
	min := uint64(minShares)
	if err := m.fs.apply(m.qosCgroup(v1.PodQOSBestEffort), Limits{CPUShares: &min}); err != nil {
		return fmt.Errorf("configure %s: %w", m.qosCgroup(v1.PodQOSBestEffort), err)
	}
	klog.InfoS("QoS cgroups ready", "driver", m.cfg.Driver, "kubepods", m.kubepods(), "cgroupVersion", m.Version(), "cpuShares", shares, "memoryLimit", top.Memory)
	return m.updateBurstable()
}

// EnsurePod creates the pod's cgroup with the pod's limits. It is cheap
// to call on every sync. The limits of a cgroup already there are left
// alone: an in-place resize changes them in its own order
// (SetPodSetting), never all at once.
func (m *Manager) EnsurePod(pod *v1.Pod) error {
	if !m.cfg.PerQOS {
		return nil
	}
	name := m.PodCgroupParent(pod)
	_, err := os.Stat(m.fs.memoryDir(name))
	existed := err == nil
	if err := m.fs.create(name); err != nil {
		return fmt.Errorf("create pod cgroup %s: %w", name, err)
	}
	if !existed {
		if err := m.fs.apply(name, m.PodLimits(pod)); err != nil {
			return fmt.Errorf("configure pod cgroup %s: %w", name, err)
		}
	}
	if qos.Class(pod) == v1.PodQOSBurstable {
		m.mu.Lock()
		_, known := m.burstable[pod.UID]
		m.burstable[pod.UID] = podCPURequest(pod)
		m.mu.Unlock()
		if !known {
			return m.updateBurstable()
		}
	}
	return nil
}

// RemovePod removes the pod's cgroup, whatever QoS class it was made for.
// It fails while anything still runs in it; call it once the pod's
// containers are gone.
func (m *Manager) RemovePod(uid types.UID) error {
	if !m.cfg.PerQOS {
		return nil
	}
	var errs []error
	for _, class := range []v1.PodQOSClass{v1.PodQOSGuaranteed, v1.PodQOSBurstable, v1.PodQOSBestEffort} {
		if err := m.fs.remove(m.podCgroup(class, uid)); err != nil {
			errs = append(errs, err)
		}
	}
	m.mu.Lock()
	_, wasBurstable := m.burstable[uid]
	delete(m.burstable, uid)
	m.mu.Unlock()
	if wasBurstable {
		errs = append(errs, m.updateBurstable())
	}
	return errors.Join(errs...)
}

// PodUIDs lists the pods that have a cgroup, e.g. to find those orphaned
// while Skiff was down.
func (m *Manager) PodUIDs() ([]types.UID, error) {
	if !m.cfg.PerQOS {
		return nil, nil
	}
	var out []types.UID
	for _, class := range []v1.PodQOSClass{v1.PodQOSGuaranteed, v1.PodQOSBurstable, v1.PodQOSBestEffort} {
		names, err := m.fs.children(m.qosCgroup(class))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			if uid, ok := podUIDFromDir(m.cfg.Driver, n); ok {
				out = append(out, uid)
			}
		}
	}
	return out, nil
}

// updateBurstable gives the burstable cgroup the shares of its pods'
// requests, so that it competes with Guaranteed pods by what it asked for.
func (m *Manager) updateBurstable() error {
	m.mu.Lock()
	var milli int64
	for _, r := range m.burstable {
		milli += r
	}
	m.mu.Unlock()
	shares := MilliCPUToShares(milli)
	return m.fs.apply(m.qosCgroup(v1.PodQOSBurstable), Limits{CPUShares: &shares})
}
