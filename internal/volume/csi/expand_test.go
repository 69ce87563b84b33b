package csi

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
)

// NodeExpandVolume gets upstream's arguments: the pod's publish target
// (a filesystem's mount directory, a block volume's device file), the
// staging path, the new size, the volume's capability and the expand
// secrets; a driver without EXPAND_VOLUME is not called.
func TestExpandAsksTheDriverWithThePodsPaths(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, hostpathLike)
	// With SINGLE_NODE_MULTI_WRITER, the access modes map as upstream's.
	f.srv.extraCaps = []csipb.NodeServiceCapability_RPC_Type{csipb.NodeServiceCapability_RPC_EXPAND_VOLUME,
		csipb.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER}
	pod := testPod("e")
	fs := Volume{SpecName: "pv-fs", Driver: testDriver, Handle: "h-fs", FSType: "ext4", AccessMode: v1.ReadWriteOncePod,
		ExpandSecrets: map[string]string{"k": "v"}}
	block := Volume{SpecName: "pv-blk", Driver: testDriver, Handle: "h-blk", AccessMode: v1.ReadWriteOnce, Block: true}
	for _, c := range []struct {
		vol            Volume
		path, staging  string
		block          bool
		wantSecrets    bool
		wantAccessMode csipb.VolumeCapability_AccessMode_Mode
	}{
		{fs, filepath.Join(f.podDir(pod), "volumes/kubernetes.io~csi/pv-fs/mount"),
			filepath.Join(f.root, "plugins/kubernetes.io/csi", testDriver, handleDir("h-fs"), "globalmount"), false, true,
			csipb.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER},
		{block, filepath.Join(f.root, "plugins/kubernetes.io/csi/volumeDevices/publish/pv-blk/uid-e"),
			filepath.Join(f.root, "plugins/kubernetes.io/csi/volumeDevices/staging/pv-blk"), true, false,
			csipb.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER},
	} {
		if _, err := f.d.SetUp(ctx, pod, f.podDir(pod), c.vol); err != nil {
			t.Fatal(err)
		}
		if err := f.d.Expand(ctx, f.podDir(pod), c.vol, 3<<30); err != nil {
			t.Fatalf("%s: %v", c.vol.SpecName, err)
		}
		r := f.srv.last("NodeExpandVolume").(*csipb.NodeExpandVolumeRequest)
		if r.VolumeId != c.vol.Handle || r.VolumePath != c.path || r.StagingTargetPath != c.staging ||
			r.GetCapacityRange().GetRequiredBytes() != 3<<30 || (r.VolumeCapability.GetBlock() != nil) != c.block ||
			(r.Secrets["k"] == "v") != c.wantSecrets || r.VolumeCapability.GetAccessMode().GetMode() != c.wantAccessMode {
			t.Errorf("%s: request %v", c.vol.SpecName, r)
		}
		if !c.block && r.VolumeCapability.GetMount().GetFsType() != "ext4" {
			t.Errorf("%s: capability %v", c.vol.SpecName, r.VolumeCapability)
		}
	}

	f.srv.extraCaps = nil
	n := len(f.srv.calls())
	err := f.d.Expand(ctx, f.podDir(pod), fs, 4<<30)
	if !errors.Is(err, ErrNoNodeExpansion) {
		t.Errorf("a driver without EXPAND_VOLUME: %v", err)
	}
	if got := f.srv.calls()[n:]; fmt.Sprint(got) != "[NodeGetCapabilities]" {
		t.Errorf("calls to a driver without EXPAND_VOLUME: %v", got)
	}
}
