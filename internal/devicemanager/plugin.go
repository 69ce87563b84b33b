package devicemanager

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// plugin is one registered resource's device plugin.
type plugin struct {
	resource string
	endpoint string // socket name in Dir
	conn     *grpc.ClientConn
	api      pluginapi.DevicePluginClient // nil: known only from the checkpoint
	opts     *pluginapi.DevicePluginOptions
	// stopped is when its stream went for good; zero while connected.
	stopped time.Time
	cancel  context.CancelFunc // ends its watch loop
}

func (p *plugin) connected() bool { return p.api != nil && p.stopped.IsZero() }

// dial connects to a plugin's socket in dir. The socket is opened with
// O_PATH|O_NOFOLLOW and reached through /proc/self/fd, so a plugin that
// swaps its socket for a symlink cannot make Skiff connect elsewhere.
func dial(ctx context.Context, dir, name string) (*grpc.ClientConn, error) {
	dialer := func(ctx context.Context, _ string) (net.Conn, error) {
		fd, err := unix.Open(filepath.Join(dir, name), unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("open plugin socket %s: %w", name, err)
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return nil, fmt.Errorf("stat plugin socket %s: %w", name, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
			return nil, fmt.Errorf("plugin endpoint %s is not a socket", name)
		}
		return (&net.Dialer{}).DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(fd))
	}
	conn, err := grpc.NewClient("passthrough:///"+name,
		grpc.WithAuthority("localhost"),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(dialer))
	if err != nil {
		return nil, fmt.Errorf("dial device plugin %s: %w", name, err)
	}
	// Connect now, so a plugin that does not answer fails its
	// registration rather than its first Allocate.
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	conn.Connect()
	for s := conn.GetState(); s != connectivity.Ready; s = conn.GetState() {
		if s == connectivity.TransientFailure {
			conn.Close()
			return nil, fmt.Errorf("connect to device plugin %s: its socket does not accept connections", name)
		}
		if !conn.WaitForStateChange(ctx, s) {
			conn.Close()
			return nil, fmt.Errorf("connect to device plugin %s: no answer within %v (last state %s)", name, dialTimeout, s)
		}
	}
	return conn, nil
}

// socketPresent reports whether the plugin's socket is still in dir.
func socketPresent(dir, name string) bool {
	fi, err := os.Lstat(filepath.Join(dir, name))
	return err == nil && fi.Mode()&os.ModeSocket != 0
}

// answers reports whether the plugin still serves: its options come back
// at once.
func (p *plugin) answers(ctx context.Context) bool {
	if p.api == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err := p.api.GetDevicePluginOptions(ctx, &pluginapi.Empty{})
	return err == nil
}

func (p *plugin) allocate(ctx context.Context, devs []string) (*pluginapi.ContainerAllocateResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := p.api.Allocate(ctx, &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: devs}},
	})
	if err != nil {
		return nil, fmt.Errorf("device plugin %s: Allocate: %w", p.resource, err)
	}
	if n := len(resp.GetContainerResponses()); n != 1 {
		return nil, fmt.Errorf("device plugin %s answered Allocate of one container with %d container responses", p.resource, n)
	}
	c := resp.ContainerResponses[0]
	if err := validateAllocation(c); err != nil {
		return nil, fmt.Errorf("device plugin %s: Allocate: %w", p.resource, err)
	}
	return c, nil
}

// validateAllocation refuses an answer whose paths the runtime could not
// use.
func validateAllocation(c *pluginapi.ContainerAllocateResponse) error {
	for _, m := range c.Mounts {
		if !filepath.IsAbs(m.ContainerPath) || !filepath.IsAbs(m.HostPath) {
			return fmt.Errorf("mount %q from %q: both paths must be absolute", m.ContainerPath, m.HostPath)
		}
	}
	for _, d := range c.Devices {
		if !filepath.IsAbs(d.ContainerPath) || !filepath.IsAbs(d.HostPath) {
			return fmt.Errorf("device %q from %q: both paths must be absolute", d.ContainerPath, d.HostPath)
		}
	}
	for k := range c.Envs {
		if k == "" {
			return fmt.Errorf("an environment variable with no name")
		}
	}
	return nil
}

func (p *plugin) preferred(ctx context.Context, available, mustInclude []string, size int) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := p.api.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{
		ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
			AvailableDeviceIDs: available, MustIncludeDeviceIDs: mustInclude, AllocationSize: int32(size),
		}},
	})
	if err != nil {
		return nil, fmt.Errorf("device plugin %s: GetPreferredAllocation: %w", p.resource, err)
	}
	if len(resp.GetContainerResponses()) == 0 {
		return nil, nil
	}
	return resp.ContainerResponses[0].DeviceIDs, nil
}

func (p *plugin) preStart(ctx context.Context, devs []string) error {
	ctx, cancel := context.WithTimeout(ctx, preStartTimeout)
	defer cancel()
	if _, err := p.api.PreStartContainer(ctx, &pluginapi.PreStartContainerRequest{DevicesIds: devs}); err != nil {
		return fmt.Errorf("device plugin %s: PreStartContainer: %w", p.resource, err)
	}
	return nil
}
