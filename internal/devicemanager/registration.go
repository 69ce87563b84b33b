package devicemanager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Listen removes every socket in Dir (the checkpoint stays), as upstream
// does at start, and listens on Dir/kubelet.sock: plugins watching Dir see
// it made again and register anew. Run serves it.
func (m *Manager) Listen() (net.Listener, error) {
	entries, err := os.ReadDir(m.cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("device plugin directory: %w", err)
	}
	for _, e := range entries {
		if e.Type()&os.ModeSocket == 0 {
			continue
		}
		if err := os.Remove(filepath.Join(m.cfg.Dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("remove old socket %s: %w", e.Name(), err)
		}
	}
	l, err := net.Listen("unix", filepath.Join(m.cfg.Dir, SocketName))
	if err != nil {
		return nil, fmt.Errorf("device plugin registration socket: %w", err)
	}
	return l, nil
}

// Run serves registrations on l until ctx ends, then stops watching
// every plugin. Assignments stay in the checkpoint.
func (m *Manager) Run(ctx context.Context, l net.Listener) {
	m.mu.Lock()
	m.runCtx = ctx
	m.mu.Unlock()
	// Stop waits for registrations in flight, so none starts a plugin's
	// watch after the wait below.
	m.server = grpc.NewServer(grpc.WaitForHandlers(true))
	pluginapi.RegisterRegistrationServer(m.server, registrar{m: m})
	done := make(chan struct{})
	go func() {
		defer close(done)
		klog.InfoS("Serving device plugin registration", "socket", l.Addr().String())
		if err := m.server.Serve(l); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			klog.ErrorS(err, "Device plugin registration server ended")
		}
	}()
	<-ctx.Done()
	m.server.Stop()
	<-done
	m.wg.Wait()
}

// registrar is the Registration service.
type registrar struct {
	pluginapi.UnimplementedRegistrationServer
	m *Manager
}

// Register checks a plugin's registration, connects to it and starts
// watching its devices. A resource whose plugin still answers cannot be
// taken by a plugin at another endpoint; a restarted plugin (the old one
// no longer answers) replaces it.
func (r registrar) Register(ctx context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	m := r.m
	log := klog.FromContext(ctx).WithValues("resource", req.ResourceName, "endpoint", req.Endpoint)
	log.Info("Device plugin registering", "version", req.Version)
	refuse := func(code codes.Code, err error) (*pluginapi.Empty, error) {
		log.Error(err, "Refused a device plugin registration")
		return nil, status.Error(code, err.Error())
	}
	if err := validateRegistration(req); err != nil {
		return refuse(codes.InvalidArgument, err)
	}
	m.mu.Lock()
	old, runCtx := m.plugins[req.ResourceName], m.runCtx
	m.mu.Unlock()
	if runCtx == nil || runCtx.Err() != nil {
		return refuse(codes.Unavailable, errors.New("the device manager is not running"))
	}
	if old != nil && old.endpoint != req.Endpoint && old.answers(ctx) {
		return refuse(codes.AlreadyExists, fmt.Errorf("resource %s is already registered by the device plugin at %s, which still answers",
			req.ResourceName, old.endpoint))
	}
	conn, err := dial(ctx, m.cfg.Dir, req.Endpoint)
	if err != nil {
		return refuse(codes.Unavailable, err)
	}
	p := &plugin{resource: req.ResourceName, endpoint: req.Endpoint, conn: conn, api: pluginapi.NewDevicePluginClient(conn)}
	octx, cancel := context.WithTimeout(ctx, callTimeout)
	p.opts, err = p.api.GetDevicePluginOptions(octx, &pluginapi.Empty{})
	cancel()
	if err != nil {
		conn.Close()
		return refuse(codes.Unavailable, fmt.Errorf("get device plugin options: %w", err))
	}
	m.install(runCtx, p)
	log.Info("Device plugin registered", "preStartRequired", p.opts.PreStartRequired,
		"getPreferredAllocationAvailable", p.opts.GetPreferredAllocationAvailable)
	return &pluginapi.Empty{}, nil
}

// install makes p its resource's plugin, ending the one it replaces, and
// starts watching its devices.
func (m *Manager) install(ctx context.Context, p *plugin) {
	ctx, p.cancel = context.WithCancel(ctx)
	m.mu.Lock()
	old := m.plugins[p.resource]
	m.plugins[p.resource] = p
	m.wg.Add(1)
	m.mu.Unlock()
	if old != nil && old.cancel != nil {
		old.cancel()
	}
	go m.watch(ctx, p)
}

// validateRegistration checks what a plugin sends before anything is
// dialled: a version Skiff speaks, an extended resource name, and an
// endpoint that is a plain file name in the plugin directory.
func validateRegistration(r *pluginapi.RegisterRequest) error {
	if !slices.Contains(pluginapi.SupportedVersions[:], r.Version) {
		return fmt.Errorf("unsupported device plugin API version %q: Skiff speaks %v", r.Version, pluginapi.SupportedVersions)
	}
	if !isExtendedResourceName(r.ResourceName) {
		return fmt.Errorf("invalid resource name %q: a device plugin's resource must be an extended resource name (domain/name, outside kubernetes.io)", r.ResourceName)
	}
	e := r.Endpoint
	if e == "" || e == "." || e == ".." || strings.ContainsAny(e, "/\x00") || e == SocketName {
		return fmt.Errorf("invalid endpoint %q: it must be the name of the plugin's socket in the device plugin directory", e)
	}
	return nil
}

// isExtendedResourceName is upstream's IsExtendedResourceName: a
// domain-qualified name outside the kubernetes.io domains that is also
// valid as a quota name (requests.<name>).
func isExtendedResourceName(name string) bool {
	if !strings.Contains(name, "/") || strings.Contains(name, v1.ResourceDefaultNamespacePrefix) ||
		strings.HasPrefix(name, v1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(v1.DefaultResourceRequestsPrefix+name)) == 0
}
