package csi

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
)

// ErrNoNodeExpansion says the driver lacks the EXPAND_VOLUME node
// capability; upstream treats it as a failed (and retried) expansion.
var ErrNoNodeExpansion = errors.New("NodeExpand is not supported by the CSI driver")

// Expand asks the driver to grow the volume the pod of podDir has set
// up to size bytes, as upstream's in-use expansion does:
// NodeGetCapabilities, then NodeExpandVolume with the pod's publish
// target (a filesystem's mount directory, or the block device file),
// the staging path if the driver stages, the volume's capability and
// the PV's node expand secrets. The error keeps the driver's gRPC code.
func (d *Drivers) Expand(ctx context.Context, podDir string, vol Volume, size int64) error {
	c, err := d.client(vol.Driver)
	if err != nil {
		return err
	}
	defer c.Close()
	caps, err := c.capabilities(ctx)
	if err != nil {
		return err
	}
	if !caps[csipb.NodeServiceCapability_RPC_EXPAND_VOLUME] {
		return fmt.Errorf("%w %s", ErrNoNodeExpansion, vol.Driver)
	}
	multiWriter := caps[csipb.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER]
	req := &csipb.NodeExpandVolumeRequest{
		VolumeId: vol.Handle, CapacityRange: &csipb.CapacityRange{RequiredBytes: size},
		VolumePath: filepath.Join(podVolumesDir(podDir), vol.SpecName, publishTarget), VolumeCapability: capability(vol, multiWriter),
		Secrets: vol.ExpandSecrets,
	}
	stages := caps[csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME]
	if stages {
		req.StagingTargetPath = d.stagingPath(vol.Driver, vol.Handle)
	}
	if vol.Block {
		req.VolumePath, req.VolumeCapability = d.blockPublishPath(vol.SpecName, filepath.Base(podDir)), blockCapability(vol, multiWriter)
		if stages {
			req.StagingTargetPath = d.blockStagingPath(vol.SpecName)
		}
	}
	defer d.lock(vol.Driver, vol.Handle)()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if _, err := c.node.NodeExpandVolume(ctx, req); err != nil {
		return fmt.Errorf("NodeExpandVolume: %w", err)
	}
	return nil
}
