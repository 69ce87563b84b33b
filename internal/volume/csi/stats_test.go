package csi

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
)

func (s *nodeServer) NodeGetVolumeStats(_ context.Context, r *csipb.NodeGetVolumeStatsRequest) (*csipb.NodeGetVolumeStatsResponse, error) {
	s.record("NodeGetVolumeStats", r)
	return &csipb.NodeGetVolumeStatsResponse{
		Usage: []*csipb.VolumeUsage{
			{Unit: csipb.VolumeUsage_BYTES, Total: 1 << 30, Available: 1<<30 - 4096, Used: 4096},
			{Unit: csipb.VolumeUsage_INODES, Total: 100, Available: 98, Used: 2},
		},
		VolumeCondition: &csipb.VolumeCondition{Abnormal: true, Message: "degraded"},
	}, nil
}

// NodeGetVolumeStats is asked with the volume's ID and publish target,
// only of a driver with GET_VOLUME_STATS; the condition is taken only
// from a driver with VOLUME_CONDITION; a target whose volume directory
// is a symlink is refused without asking the driver.
func TestVolumeStats(t *testing.T) {
	f := newFixture(t, hostpathLike)
	f.srv.noDisk = true
	ctx := context.Background()
	pod := testPod("st")
	target, err := f.d.SetUp(ctx, pod, f.podDir(pod), pv1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.d.VolumeStats(ctx, target); !errors.Is(err, ErrNoVolumeStats) {
		t.Errorf("a driver without GET_VOLUME_STATS: %v", err)
	}
	if f.srv.last("NodeGetVolumeStats") != nil {
		t.Error("a driver without GET_VOLUME_STATS was asked for stats")
	}
	f.srv.extraCaps = []csipb.NodeServiceCapability_RPC_Type{csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS}
	s, err := f.d.VolumeStats(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	req := f.srv.last("NodeGetVolumeStats").(*csipb.NodeGetVolumeStatsRequest)
	if req.VolumeId != "vol-1" || req.VolumePath != target {
		t.Errorf("request %v", req)
	}
	if s.UsedBytes != 4096 || s.CapacityBytes != 1<<30 || s.InodesUsed != 2 || s.InodesFree != 98 || s.Abnormal != nil {
		t.Errorf("stats %+v, want the usage and no condition", s)
	}
	f.srv.extraCaps = append(f.srv.extraCaps, csipb.NodeServiceCapability_RPC_VOLUME_CONDITION)
	if s, err := f.d.VolumeStats(ctx, target); err != nil || s.Abnormal == nil || !*s.Abnormal || s.Message != "degraded" {
		t.Errorf("stats with a condition %+v, %v", s, err)
	}

	calls := len(f.srv.calls())
	c := newCanary(t, "pv-1/"+publishTarget)
	volDir := filepath.Dir(target)
	must(t, os.Rename(volDir, volDir+".real"))
	must(t, os.Symlink(filepath.Join(c.dir, "pv-1"), volDir))
	if _, err := f.d.VolumeStats(ctx, target); err == nil {
		t.Error("stats through a symlinked volume directory")
	}
	if len(f.srv.calls()) != calls {
		t.Errorf("the driver was called for a symlinked volume: %v", f.srv.calls()[calls:])
	}
	c.untouched(t)
}
