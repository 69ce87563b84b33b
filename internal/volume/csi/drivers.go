// Package csi is the node side of the Container Storage Interface: it
// registers CSI drivers that announce themselves in the plugin registry
// (the pluginwatcher's handler of type CSIPlugin), publishes what they say
// of the node in the CSINode object and the Node, and calls their node
// service. Every call to a driver has a deadline.
package csi

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	storagev1client "k8s.io/client-go/kubernetes/typed/storage/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/pluginwatcher"
)

// Config configures Drivers.
type Config struct {
	NodeName string
	RootDir  string // --root-dir: staging paths live under RootDir/plugins
	// Nodes and CSINodes are the apiserver's; nil standalone, where
	// nothing is published. CSIDrivers reads the CSIDriver objects that
	// say how to mount a driver's volumes; nil: upstream's defaults.
	Nodes      corev1client.NodeInterface
	CSINodes   storagev1client.CSINodeInterface
	CSIDrivers storagev1client.CSIDriverInterface
	// CallTimeout bounds each call to a driver; 2 minutes when zero.
	CallTimeout time.Duration
	// Registered is called after a driver registered, so that volumes
	// waiting for it are retried at once; may be nil.
	Registered func(driver string)
	// Tokens gives the service account tokens a CSIDriver's
	// tokenRequests ask for; nil standalone, where such a driver's
	// volumes fail.
	Tokens TokenSource
	// VolumeAttachments and Node (this node's Node as the apiserver has
	// it) tell whether a volume needing attachment is attached; nil
	// standalone, where such volumes are refused. InUseChanged asks for
	// the Node's status to be posted at once, when a volume starts to be
	// wanted or a pod's volumes are torn down; may be nil.
	VolumeAttachments storagev1client.VolumeAttachmentInterface
	Node              func() (*v1.Node, bool)
	InUseChanged      func()
}

// Drivers is the registry of CSI drivers on this node.
type Drivers struct {
	cfg  Config
	info *nodeInfoManager // nil standalone

	mu      sync.Mutex
	drivers map[string]driver
	locks   map[string]*volumeLock // by driver and handle
	// staged are the volumes this process saw NodeStageVolume succeed
	// for, by driver and handle. A staging directory found on disk is
	// not enough: Skiff may have died before or during the call.
	staged map[string]bool

	use volumeUse // what the Node's volumesInUse is made of
}

// driver is a registered driver: where its node service listens.
type driver struct {
	endpoint string
	version  string
}

var _ pluginwatcher.Handler = (*Drivers)(nil)

// New returns an empty registry.
func New(cfg Config) *Drivers {
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = callTimeout
	}
	d := &Drivers{cfg: cfg, drivers: map[string]driver{}, locks: map[string]*volumeLock{}, staged: map[string]bool{}}
	if cfg.Nodes != nil && cfg.CSINodes != nil {
		d.info = &nodeInfoManager{nodeName: cfg.NodeName, nodes: cfg.Nodes, csiNodes: cfg.CSINodes}
	}
	return d
}

// Validate refuses a driver whose name could not name a CSIDriver object
// (nor a directory of Skiff's: no "/" and no "..") or that speaks no CSI
// 1.x version.
func (d *Drivers) Validate(info pluginwatcher.Info) error {
	if err := validDriverName(info.Name); err != nil {
		return err
	}
	if !strings.HasPrefix(info.Endpoint, "/") {
		return fmt.Errorf("driver %s: endpoint %q is not an absolute socket path", info.Name, info.Endpoint)
	}
	if _, err := highestVersion(info.Versions); err != nil {
		return fmt.Errorf("driver %s: %w", info.Name, err)
	}
	return nil
}

// highestVersion picks the highest CSI 1.x version among those offered.
func highestVersion(versions []string) (string, error) {
	best, bestMinor := "", -1
	for _, v := range versions {
		parts := strings.Split(strings.TrimPrefix(v, "v"), ".")
		if len(parts) == 0 || parts[0] != "1" {
			continue
		}
		minor := 0
		if len(parts) > 1 {
			m, err := strconv.Atoi(parts[1])
			if err != nil {
				continue
			}
			minor = m
		}
		if minor > bestMinor {
			best, bestMinor = v, minor
		}
	}
	if best == "" {
		return "", fmt.Errorf("none of the versions specified %q are supported; Skiff speaks CSI 1.x", versions)
	}
	return best, nil
}

// Register asks the driver for its node information, publishes it, and
// makes the driver available to volumes. A failure leaves nothing
// registered.
func (d *Drivers) Register(ctx context.Context, info pluginwatcher.Info) error {
	version, err := highestVersion(info.Versions)
	if err != nil {
		return err
	}
	c, err := dialNode(info.Endpoint, d.cfg.CallTimeout)
	if err != nil {
		return err
	}
	defer c.Close()
	ni, err := c.nodeGetInfo(ctx)
	if err != nil {
		return err
	}
	if d.info != nil {
		if err := d.info.install(ctx, info.Name, ni); err != nil {
			return fmt.Errorf("publish node info of driver %s: %w", info.Name, err)
		}
	}
	d.mu.Lock()
	d.drivers[info.Name] = driver{endpoint: info.Endpoint, version: version}
	d.mu.Unlock()
	klog.InfoS("Registered CSI driver", "driver", info.Name, "endpoint", info.Endpoint, "nodeID", ni.nodeID,
		"maxVolumes", ni.maxVolumes, "topology", ni.topology)
	if d.cfg.Registered != nil {
		d.cfg.Registered(info.Name)
	}
	return nil
}

// Deregister forgets the driver and removes it from the CSINode and the
// Node's annotation.
func (d *Drivers) Deregister(ctx context.Context, info pluginwatcher.Info) {
	d.mu.Lock()
	delete(d.drivers, info.Name)
	d.mu.Unlock()
	if d.info != nil {
		if err := d.info.uninstall(ctx, info.Name); err != nil {
			klog.ErrorS(err, "Cannot remove a deregistered CSI driver from the node's objects", "driver", info.Name)
		}
	}
	klog.InfoS("Deregistered CSI driver", "driver", info.Name)
}

// client connects to a registered driver's node service.
func (d *Drivers) client(name string) (*nodeClient, error) {
	d.mu.Lock()
	drv, ok := d.drivers[name]
	d.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("driver name %s not found in the list of registered CSI drivers", name)
	}
	return dialNode(drv.endpoint, d.cfg.CallTimeout)
}

// volumeLock serialises the operations on one volume of a driver:
// staging and publishing for one pod against unpublishing and unstaging
// for another.
type volumeLock struct {
	mu    sync.Mutex
	users int
}

// lock locks the volume and returns its unlock.
func (d *Drivers) lock(driver, handle string) func() {
	key := volumeKey(driver, handle)
	d.mu.Lock()
	l := d.locks[key]
	if l == nil {
		l = &volumeLock{}
		d.locks[key] = l
	}
	l.users++
	d.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		d.mu.Lock()
		if l.users--; l.users == 0 {
			delete(d.locks, key)
		}
		d.mu.Unlock()
	}
}
