package csi

import (
	"context"
	"fmt"
	"net"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// callTimeout bounds every call to a driver, as upstream's csiTimeout.
const callTimeout = 2 * time.Minute

// nodeClient calls a driver's node service on its endpoint (a unix
// socket). Every call has a deadline.
type nodeClient struct {
	conn    *grpc.ClientConn
	node    csipb.NodeClient
	timeout time.Duration
}

func dialNode(endpoint string, timeout time.Duration) (*nodeClient, error) {
	conn, err := grpc.NewClient("passthrough:///"+endpoint,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", endpoint)
		}))
	if err != nil {
		return nil, fmt.Errorf("CSI endpoint %s: %w", endpoint, err)
	}
	return &nodeClient{conn: conn, node: csipb.NewNodeClient(conn), timeout: timeout}, nil
}

func (c *nodeClient) Close() error { return c.conn.Close() }

// nodeInfo is what NodeGetInfo says of this node.
type nodeInfo struct {
	nodeID     string
	maxVolumes int64
	topology   map[string]string
}

func (c *nodeClient) nodeGetInfo(ctx context.Context) (nodeInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	r, err := c.node.NodeGetInfo(ctx, &csipb.NodeGetInfoRequest{})
	if err != nil {
		return nodeInfo{}, fmt.Errorf("NodeGetInfo: %w", err)
	}
	info := nodeInfo{nodeID: r.GetNodeId(), maxVolumes: r.GetMaxVolumesPerNode()}
	if t := r.GetAccessibleTopology(); t != nil {
		info.topology = t.GetSegments()
	}
	if info.nodeID == "" {
		return nodeInfo{}, fmt.Errorf("NodeGetInfo: the driver gave an empty node ID")
	}
	return info, nil
}

// stagesVolumes tells whether the driver has the STAGE_UNSTAGE_VOLUME
// node capability.
func (c *nodeClient) stagesVolumes(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	r, err := c.node.NodeGetCapabilities(ctx, &csipb.NodeGetCapabilitiesRequest{})
	if err != nil {
		return false, fmt.Errorf("NodeGetCapabilities: %w", err)
	}
	for _, cp := range r.GetCapabilities() {
		if cp.GetRpc().GetType() == csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME {
			return true, nil
		}
	}
	return false, nil
}

func (c *nodeClient) stage(ctx context.Context, req *csipb.NodeStageVolumeRequest) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if _, err := c.node.NodeStageVolume(ctx, req); err != nil {
		return fmt.Errorf("NodeStageVolume: %w", err)
	}
	return nil
}

func (c *nodeClient) unstage(ctx context.Context, handle, stagingPath string) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if _, err := c.node.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: handle, StagingTargetPath: stagingPath}); err != nil {
		return fmt.Errorf("NodeUnstageVolume: %w", err)
	}
	return nil
}

func (c *nodeClient) publish(ctx context.Context, req *csipb.NodePublishVolumeRequest) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if _, err := c.node.NodePublishVolume(ctx, req); err != nil {
		return fmt.Errorf("NodePublishVolume: %w", err)
	}
	return nil
}

func (c *nodeClient) unpublish(ctx context.Context, handle, target string) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if _, err := c.node.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: handle, TargetPath: target}); err != nil {
		return fmt.Errorf("NodeUnpublishVolume: %w", err)
	}
	return nil
}
