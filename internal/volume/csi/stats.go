package csi

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
)

// VolumeStats is what a driver's NodeGetVolumeStats says of a published
// volume: bytes and inodes (zero when the driver gave none), and its
// condition when the driver reports one (VOLUME_CONDITION).
type VolumeStats struct {
	CapacityBytes, AvailableBytes, UsedBytes uint64
	Inodes, InodesFree, InodesUsed           uint64
	// Abnormal is nil when the driver reports no condition.
	Abnormal *bool
	Message  string
}

// ErrNoVolumeStats says the driver does not report volume stats (it lacks
// the GET_VOLUME_STATS node capability): upstream leaves such volumes
// out of the stats.
var ErrNoVolumeStats = errors.New("the CSI driver does not report volume stats")

// VolumeStats asks the driver of the volume published at target (a pod's
// .../kubernetes.io~csi/<name>/mount, read from its vol_data.json held
// below the root) for the volume's usage, as upstream's csi metrics:
// NodeGetCapabilities, then NodeGetVolumeStats with the volume's ID and
// target.
func (d *Drivers) VolumeStats(ctx context.Context, target string) (VolumeStats, error) {
	if filepath.Base(target) != publishTarget {
		return VolumeStats{}, fmt.Errorf("%s is not a CSI publish target", target)
	}
	v, ok, err := d.root().readVolData(filepath.Dir(target))
	if err != nil {
		return VolumeStats{}, err
	}
	if !ok {
		return VolumeStats{}, fmt.Errorf("no %s beside %s", volDataFile, target)
	}
	c, err := d.client(v.DriverName)
	if err != nil {
		return VolumeStats{}, err
	}
	defer c.Close()
	caps, err := c.capabilities(ctx)
	if err != nil {
		return VolumeStats{}, err
	}
	if !caps[csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS] {
		return VolumeStats{}, fmt.Errorf("driver %s: %w", v.DriverName, ErrNoVolumeStats)
	}
	r, err := c.volumeStats(ctx, v.VolumeHandle, target)
	if err != nil {
		return VolumeStats{}, err
	}
	condition := caps[csipb.NodeServiceCapability_RPC_VOLUME_CONDITION]
	if !condition && r.GetUsage() == nil {
		return VolumeStats{}, fmt.Errorf("NodeGetVolumeStats of %s gave no usage", v.VolumeHandle)
	}
	return statsOf(r, condition), nil
}

// statsOf reads a NodeGetVolumeStats answer; a negative figure (which
// the spec forbids) counts as zero.
func statsOf(r *csipb.NodeGetVolumeStatsResponse, condition bool) VolumeStats {
	var s VolumeStats
	u := func(v int64) uint64 { return uint64(max(v, 0)) }
	for _, usage := range r.GetUsage() {
		switch usage.GetUnit() {
		case csipb.VolumeUsage_BYTES:
			s.CapacityBytes, s.AvailableBytes, s.UsedBytes = u(usage.GetTotal()), u(usage.GetAvailable()), u(usage.GetUsed())
		case csipb.VolumeUsage_INODES:
			s.Inodes, s.InodesFree, s.InodesUsed = u(usage.GetTotal()), u(usage.GetAvailable()), u(usage.GetUsed())
		}
	}
	if condition {
		abnormal := r.GetVolumeCondition().GetAbnormal()
		s.Abnormal, s.Message = &abnormal, r.GetVolumeCondition().GetMessage()
	}
	return s
}

// capabilities asks the driver for its node capabilities.
func (c *nodeClient) capabilities(ctx context.Context) (map[csipb.NodeServiceCapability_RPC_Type]bool, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	r, err := c.node.NodeGetCapabilities(ctx, &csipb.NodeGetCapabilitiesRequest{})
	if err != nil {
		return nil, fmt.Errorf("NodeGetCapabilities: %w", err)
	}
	out := map[csipb.NodeServiceCapability_RPC_Type]bool{}
	for _, cp := range r.GetCapabilities() {
		out[cp.GetRpc().GetType()] = true
	}
	return out, nil
}

func (c *nodeClient) volumeStats(ctx context.Context, handle, target string) (*csipb.NodeGetVolumeStatsResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	r, err := c.node.NodeGetVolumeStats(ctx, &csipb.NodeGetVolumeStatsRequest{VolumeId: handle, VolumePath: target})
	if err != nil {
		return nil, fmt.Errorf("NodeGetVolumeStats: %w", err)
	}
	return r, nil
}
