package dra

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"

	"github.com/skiff-sh/skiff/internal/metrics"
	"github.com/skiff-sh/skiff/internal/pluginwatcher"
)

// CallTimeout bounds every call to a DRA driver: upstream's, which no
// kubelet setting changes.
const CallTimeout = 45 * time.Second

// services are the DRA kubelet plugin gRPC services Skiff speaks, in the
// order it prefers them, as upstream 1.34.
var services = []string{drapbv1.DRAPluginService, drapbv1beta1.DRAPluginService}

// driverClient is what Skiff asks of a DRA driver.
type driverClient interface {
	NodePrepareResources(ctx context.Context, req *drapbv1.NodePrepareResourcesRequest, opts ...grpc.CallOption) (*drapbv1.NodePrepareResourcesResponse, error)
	NodeUnprepareResources(ctx context.Context, req *drapbv1.NodeUnprepareResourcesRequest, opts ...grpc.CallOption) (*drapbv1.NodeUnprepareResourcesResponse, error)
}

// driver is one registered DRA driver.
type driver struct {
	name, endpoint, service string
	conn                    *grpc.ClientConn
	client                  driverClient
	timeout                 time.Duration
	connected               bool // guarded by Drivers.mu
}

// Drivers are the registered DRA drivers, by name: the plugin watcher's
// handler of type DRAPlugin. A driver that registers again from another
// endpoint (a new instance during an update) replaces the old one.
type Drivers struct {
	mu      sync.Mutex
	drivers map[string]*driver
	cfg     DriversConfig
}

// DriversConfig configures the registry.
type DriversConfig struct {
	// Registered, if set, is told a driver's name when it registers.
	Registered func(name string)
	// Available, if set, is told whether a driver is usable: registered
	// and connected. It is called under the registry's lock, in order.
	Available func(name string, usable bool)
	// Metrics, if set, times every call to a driver.
	Metrics *metrics.DRAMetrics
	// Disabled refuses every driver: the DynamicResourceAllocation
	// feature gate is off.
	Disabled bool
	// CallTimeout bounds each call; 0 is CallTimeout. Tests shorten it.
	CallTimeout time.Duration
}

// NewDrivers returns an empty registry.
func NewDrivers(cfg DriversConfig) *Drivers {
	if cfg.Registered == nil {
		cfg.Registered = func(string) {}
	}
	if cfg.Available == nil {
		cfg.Available = func(string, bool) {}
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = CallTimeout
	}
	return &Drivers{drivers: map[string]*driver{}, cfg: cfg}
}

// timed records a call's duration as upstream's
// dra_grpc_operations_duration_seconds.
func (d *Drivers) timed(name string) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		start := time.Now()
		err := invoker(ctx, method, req, reply, cc, opts...)
		if d.cfg.Metrics != nil {
			d.cfg.Metrics.GRPC.WithLabelValues(name, method, status.Code(err).String()).Observe(time.Since(start).Seconds())
		}
		return err
	}
}

// chooseService is the first service Skiff prefers that the driver offers.
func chooseService(offered []string) (string, error) {
	for _, s := range services {
		if slices.Contains(offered, s) {
			return s, nil
		}
	}
	return "", fmt.Errorf("none of the services the plugin supports (%q) are supported by Skiff (%q)", offered, services)
}

// Validate refuses a driver without a name, an absolute socket path or a
// service Skiff speaks.
func (d *Drivers) Validate(info pluginwatcher.Info) error {
	if d.cfg.Disabled {
		return fmt.Errorf("DRA driver %s refused: the DynamicResourceAllocation feature gate is disabled", info.Name)
	}
	if info.Name == "" {
		return fmt.Errorf("DRA driver at %s has no name", info.Endpoint)
	}
	if !strings.HasPrefix(info.Endpoint, "/") {
		return fmt.Errorf("DRA driver %s: endpoint %q is not an absolute socket path", info.Name, info.Endpoint)
	}
	if _, err := chooseService(info.Versions); err != nil {
		return fmt.Errorf("invalid supported gRPC versions of DRA driver plugin %s at endpoint %s: %w", info.Name, info.Endpoint, err)
	}
	return nil
}

// Register connects to the driver's endpoint in the service chosen.
// The connection is made at once and watched, so that a driver whose
// socket stops answering is known to be away (its slices are wiped).
func (d *Drivers) Register(_ context.Context, info pluginwatcher.Info) error {
	service, err := chooseService(info.Versions)
	if err != nil {
		return err
	}
	endpoint := info.Endpoint
	drv := &driver{name: info.Name, endpoint: endpoint, service: service, timeout: d.cfg.CallTimeout}
	conn, err := grpc.NewClient("passthrough:///"+endpoint,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(d.timed(info.Name)),
		grpc.WithStatsHandler(connWatch{d: d, drv: drv}),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var nd net.Dialer
			return nd.DialContext(ctx, "unix", endpoint)
		}))
	if err != nil {
		return fmt.Errorf("DRA driver %s endpoint %s: %w", info.Name, endpoint, err)
	}
	drv.conn = conn
	if service == drapbv1.DRAPluginService {
		drv.client = drapbv1.NewDRAPluginClient(conn)
	} else {
		drv.client = drapbv1beta1.V1Beta1ClientWrapper{DRAPluginClient: drapbv1beta1.NewDRAPluginClient(conn)}
	}
	d.mu.Lock()
	old := d.drivers[info.Name]
	d.drivers[info.Name] = drv
	d.syncLocked(info.Name)
	d.mu.Unlock()
	if old != nil {
		_ = old.conn.Close()
	}
	conn.Connect()
	klog.InfoS("Registered DRA driver", "driver", info.Name, "endpoint", endpoint, "service", service)
	d.cfg.Registered(info.Name)
	return nil
}

// Deregister forgets the driver if this registration is still its own;
// its ResourceSlices are wiped unless it registers again soon.
func (d *Drivers) Deregister(_ context.Context, info pluginwatcher.Info) {
	d.mu.Lock()
	drv := d.drivers[info.Name]
	if drv == nil || drv.endpoint != info.Endpoint {
		d.mu.Unlock()
		return
	}
	delete(d.drivers, info.Name)
	d.syncLocked(info.Name)
	d.mu.Unlock()
	_ = drv.conn.Close()
	klog.InfoS("Deregistered DRA driver", "driver", info.Name)
}

// syncLocked tells Available whether the driver is usable; the caller
// holds mu.
func (d *Drivers) syncLocked(name string) {
	drv := d.drivers[name]
	d.cfg.Available(name, drv != nil && drv.connected)
}

// connWatch follows a driver's connection: gRPC calls it when the
// connection is made and when it ends.
type connWatch struct {
	d   *Drivers
	drv *driver
}

func (connWatch) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (connWatch) HandleRPC(context.Context, stats.RPCStats)                         {}
func (connWatch) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

func (w connWatch) HandleConn(_ context.Context, s stats.ConnStats) {
	var connected bool
	switch s.(type) {
	case *stats.ConnBegin:
		connected = true
	case *stats.ConnEnd:
	default:
		return
	}
	w.d.mu.Lock()
	defer w.d.mu.Unlock()
	if w.d.drivers[w.drv.name] != w.drv {
		return // replaced or deregistered: its connection is being closed
	}
	w.drv.connected = connected
	w.d.syncLocked(w.drv.name)
	if !connected {
		// gRPC does not reconnect an idle channel by itself, and a
		// driver that comes back must be noticed. Not from here: gRPC
		// holds a lock that Connect takes.
		go w.drv.conn.Connect()
	}
	klog.V(2).InfoS("DRA driver connection changed", "driver", w.drv.name, "endpoint", w.drv.endpoint, "connected", connected)
}

// get is the registered driver of that name.
func (d *Drivers) get(name string) (*driver, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	drv := d.drivers[name]
	if drv == nil {
		return nil, fmt.Errorf("DRA driver %s is not registered", name)
	}
	return drv, nil
}

// prepare calls NodePrepareResources with the call deadline.
func (drv *driver) prepare(ctx context.Context, claims []*drapbv1.Claim) (*drapbv1.NodePrepareResourcesResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, drv.timeout)
	defer cancel()
	resp, err := drv.client.NodePrepareResources(ctx, &drapbv1.NodePrepareResourcesRequest{Claims: claims})
	if err != nil {
		return nil, fmt.Errorf("NodePrepareResources of DRA driver %s: %w", drv.name, err)
	}
	return resp, nil
}

// unprepare calls NodeUnprepareResources with the call deadline.
func (drv *driver) unprepare(ctx context.Context, claims []*drapbv1.Claim) (*drapbv1.NodeUnprepareResourcesResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, drv.timeout)
	defer cancel()
	resp, err := drv.client.NodeUnprepareResources(ctx, &drapbv1.NodeUnprepareResourcesRequest{Claims: claims})
	if err != nil {
		return nil, fmt.Errorf("NodeUnprepareResources of DRA driver %s: %w", drv.name, err)
	}
	return resp, nil
}
