// Package nodestatus owns this kubelet's Node object: it registers the Node,
// computes its status (capacity, allocatable, addresses, node info,
// conditions) the way the upstream kubelet does, posts it when it changes
// or every nodeStatusReportFrequency, renews the node Lease, and hands the
// Node's pod CIDR to the container runtime.
package nodestatus

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"
)

// DefaultKubeletVersion is reported when Config.KubeletVersion is empty.
// Build metadata ("+skiff") rather than a pre-release suffix keeps semver
// comparisons equal to v1.34.4, as k3s does with "+k3s1".
const DefaultKubeletVersion = "v1.34.4+skiff"

// RuntimeStatus is what the controller needs of the CRI runtime service;
// k8s.io/cri-api's RuntimeService satisfies it.
type RuntimeStatus interface {
	Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error)
	Version(ctx context.Context, apiVersion string) (*runtimeapi.VersionResponse, error)
	RuntimeConfigUpdater
}

// EventRecorder records node events; client-go's record.EventRecorder
// satisfies it.
type EventRecorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

// HealthCheck is an extra readiness check (upstream checks PLEG this way): a
// failing check makes the node NotReady with "<Name> is not healthy: <err>".
type HealthCheck struct {
	Name  string
	Check func() error
}

// Client is what the controller calls: the Node (core/v1) and its Lease
// (coordination/v1). client-go's clientsets satisfy it.
type Client interface {
	CoreV1() corev1client.CoreV1Interface
	CoordinationV1() coordinationv1client.CoordinationV1Interface
}

// Config configures a Controller.
type Config struct {
	// Client is the apiserver client; nil means standalone: no
	// registration, status posting or lease, only Node() for admission.
	Client Client
	// HeartbeatClient renews the Lease and posts the node status: as
	// upstream's heartbeat client, one without client-side rate limit
	// and with a timeout, so that others queueing on Client's rate
	// limiter cannot make the node miss a heartbeat. Client when nil.
	HeartbeatClient Client
	NodeName        string
	// NodeIPs is --node-ip (one address per family); empty means detect.
	NodeIPs []string
	// Kubelet is the defaulted, validated configuration.
	Kubelet    *kubeletconfigv1beta1.KubeletConfiguration
	NodeLabels map[string]string // --node-labels
	// ExternalCloudProvider is --cloud-provider=external: the Node
	// registers tainted uninitialized and the provider owns its addresses.
	ExternalCloudProvider bool
	// RootDir is --root-dir: ephemeral-storage is the size of its filesystem.
	RootDir string
	Runtime RuntimeStatus
	// KubeletVersion is status.nodeInfo.kubeletVersion, a semantic version
	// with a leading "v"; DefaultKubeletVersion when empty.
	KubeletVersion string
	Clock          clock.Clock // the real clock when nil

	// Optional.
	// Images lists the runtime's images for status.images; nil reports none.
	Images       ImageLister
	Recorder     EventRecorder
	HealthChecks []HealthCheck
	// Pressure returns the pressure conditions that hold now (the eviction
	// manager's); none when nil.
	Pressure func() []v1.NodeConditionType
	// NotReady is a further reason for the node not to be Ready, after
	// the runtime's (upstream's node shutdown manager's status); nil when
	// there is none.
	NotReady func() error
	// Extended returns the device plugins' resources: capacity (every
	// device), allocatable (the healthy ones) and the resources gone,
	// whose capacity is set to zero; none when nil.
	Extended func() (capacity, allocatable v1.ResourceList, removed []string)
	// VolumesInUse returns status.volumesInUse, the attachable volumes
	// mounted or about to be (the CSI drivers'); left alone when nil.
	VolumesInUse func(ctx context.Context) []v1.UniqueVolumeName
	// OnRepeatedHeartbeatFailure is called when status or lease updates
	// fail repeatedly; upstream closes the client's connections there so
	// that a dead TCP connection is not reused.
	OnRepeatedHeartbeatFailure func()
}

// Controller keeps the Node object of this kubelet.
type Controller struct {
	cfg       Config
	kc        *kubeletconfigv1beta1.KubeletConfiguration
	clock     clock.Clock
	machine   *machine
	res       *reservations
	runtime   *runtimeState
	nodeIPs   []net.IP
	version   string
	nodeRef   *v1.ObjectReference
	addresses func(ctx context.Context) ([]v1.NodeAddress, error)
	rootFS    func() (int64, error)
	// leaseRenew is how often the lease is renewed: a quarter of its
	// duration, as upstream.
	leaseRenew time.Duration

	mu          sync.Mutex
	lister      corelisters.NodeLister // set by Run in cluster mode
	latest      *v1.Node               // last Node the apiserver returned, or the local one standalone
	allocatable v1.ResourceList
	lastReport  time.Time
	podCIDR     string // last pod CIDR the runtime accepted
	readyPosted bool

	// syncNow asks the status loop for a full update at once (SyncNow).
	syncNow chan struct{}
}

// New checks the configuration and reads the machine's capacity.
func New(cfg Config) (*Controller, error) {
	if cfg.NodeName == "" || cfg.Kubelet == nil || cfg.Runtime == nil {
		return nil, errors.New("nodestatus: NodeName, Kubelet and Runtime are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.HeartbeatClient == nil {
		cfg.HeartbeatClient = cfg.Client
	}
	if cfg.KubeletVersion == "" {
		cfg.KubeletVersion = DefaultKubeletVersion
	}
	// kubectl and the control plane parse it as semver; upstream's has a "v".
	if _, err := version.ParseSemantic(cfg.KubeletVersion); err != nil || cfg.KubeletVersion[0] != 'v' {
		return nil, fmt.Errorf("kubelet version %q is not a semantic version like v1.34.4", cfg.KubeletVersion)
	}
	res, err := parseReservations(cfg.Kubelet)
	if err != nil {
		return nil, err
	}
	ips, err := parseNodeIPs(cfg.NodeIPs)
	if err != nil {
		return nil, err
	}
	m, err := readMachine(defaultHostPaths)
	if err != nil {
		return nil, err
	}
	c := &Controller{
		cfg:        cfg,
		kc:         cfg.Kubelet,
		clock:      cfg.Clock,
		machine:    m,
		res:        res,
		runtime:    newRuntimeState(cfg.Runtime, cfg.Clock, cfg.HealthChecks),
		nodeIPs:    ips,
		version:    cfg.KubeletVersion,
		nodeRef:    &v1.ObjectReference{Kind: "Node", Name: cfg.NodeName, UID: types.UID(cfg.NodeName)},
		rootFS:     func() (int64, error) { return filesystemBytes(cfg.RootDir) },
		leaseRenew: time.Duration(cfg.Kubelet.NodeLeaseDurationSeconds) * time.Second / 4,
		syncNow:    make(chan struct{}, 1),
	}
	c.addresses = func(ctx context.Context) ([]v1.NodeAddress, error) {
		return nodeAddresses(ctx, c.nodeIPs, cfg.NodeName)
	}
	capacity := c.capacity()
	c.allocatable = allocatable(capacity, res.reserved(capacity))
	return c, nil
}

// Node returns the last known Node: in cluster mode as the apiserver has it
// (labels others set included), standalone as computed locally. It is nil
// until the node is registered (or, standalone, until Run computed it).
func (c *Controller) Node() *v1.Node {
	c.mu.Lock()
	lister, latest := c.lister, c.latest
	c.mu.Unlock()
	if lister != nil {
		if n, err := lister.Get(c.cfg.NodeName); err == nil {
			return n.DeepCopy()
		}
	}
	if latest == nil {
		return nil
	}
	return latest.DeepCopy()
}

// SyncNow asks for the status to be computed and posted at once, as
// upstream's shutdown manager does when the node starts shutting down;
// it does not wait.
func (c *Controller) SyncNow() {
	select {
	case c.syncNow <- struct{}{}:
	default: // one is pending already
	}
}

// Allocatable returns the node's allocatable resources as last computed.
func (c *Controller) Allocatable() v1.ResourceList {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.allocatable.DeepCopy()
}

// nodeUID is the registered Node's UID, "" while unknown.
func (c *Controller) nodeUID() types.UID {
	if n := c.Node(); n != nil {
		return n.UID
	}
	return ""
}

// setLatest remembers a Node the apiserver returned (or the local one).
func (c *Controller) setLatest(n *v1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.latest = n
}
