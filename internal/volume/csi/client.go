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
