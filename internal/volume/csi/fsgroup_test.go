package csi

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/utils/ptr"
)

// Who applies the pod's fsGroup to a CSI volume, by the CSIDriver's
// fsGroupPolicy, the volume and the driver's VOLUME_MOUNT_GROUP
// capability: Skiff (the published files get the group), the driver (the
// gid in volume_mount_group at stage and publish), or nobody.
func TestFSGroupByPolicyAndDriverCapability(t *testing.T) {
	const gid = 3456
	rwo := []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}
	rwx := []v1.PersistentVolumeAccessMode{v1.ReadWriteMany}
	for _, c := range []struct {
		name       string
		policy     *storagev1.FSGroupPolicy
		fsType     string
		modes      []v1.PersistentVolumeAccessMode
		readOnly   bool
		mountGroup bool // the driver has VOLUME_MOUNT_GROUP
		noFSGroup  bool
		bySkiff    bool
	}{
		{name: "File", policy: ptr.To(storagev1.FileFSGroupPolicy), modes: rwx, bySkiff: true},
		{name: "ReadWriteOnceWithFSType, RWO with fsType", policy: ptr.To(storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy), fsType: "ext4", modes: rwo, bySkiff: true},
		{name: "default policy is ReadWriteOnceWithFSType", fsType: "ext4", modes: rwo, bySkiff: true},
		{name: "ReadWriteOnceWithFSType, no fsType", policy: ptr.To(storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy), modes: rwo},
		{name: "ReadWriteOnceWithFSType, RWX", policy: ptr.To(storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy), fsType: "ext4", modes: rwx},
		{name: "None", policy: ptr.To(storagev1.NoneFSGroupPolicy), fsType: "ext4", modes: rwo},
		{name: "read-only volume", policy: ptr.To(storagev1.FileFSGroupPolicy), modes: rwo, readOnly: true},
		{name: "no fsGroup", policy: ptr.To(storagev1.FileFSGroupPolicy), modes: rwo, noFSGroup: true},
		{name: "the driver applies it", policy: ptr.To(storagev1.FileFSGroupPolicy), modes: rwo, mountGroup: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := hostpathLike.DeepCopy()
			spec.FSGroupPolicy = c.policy
			f := newFixture(t, spec)
			if c.mountGroup {
				f.srv.extraCaps = []csipb.NodeServiceCapability_RPC_Type{csipb.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP}
			}
			must(t, os.WriteFile(filepath.Join(f.srv.data, "f"), []byte("x"), 0o600))
			pod := testPod("g")
			if !c.noFSGroup {
				pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptr.To[int64](gid)}
			}
			vol := Volume{SpecName: "pv-1", Driver: testDriver, Handle: "vol-1", FSType: c.fsType, AccessMode: c.modes[0],
				AccessModes: c.modes, ReadOnly: c.readOnly}
			if _, err := f.d.SetUp(context.Background(), pod, f.podDir(pod), vol); err != nil {
				t.Fatal(err)
			}
			var st unix.Stat_t
			must(t, unix.Stat(filepath.Join(f.srv.data, "f"), &st))
			if applied := st.Gid == gid && st.Mode&0o660 == 0o660; applied != c.bySkiff {
				t.Errorf("Skiff applied the fsGroup: %v (gid %d, mode %o), want %v", applied, st.Gid, st.Mode, c.bySkiff)
			}
			stage := f.srv.last("NodeStageVolume").(*csipb.NodeStageVolumeRequest)
			pub := f.srv.last("NodePublishVolume").(*csipb.NodePublishVolumeRequest)
			want := ""
			if c.mountGroup {
				want = "3456"
			}
			if got := stage.GetVolumeCapability().GetMount().GetVolumeMountGroup(); got != want {
				t.Errorf("stage volume_mount_group %q, want %q", got, want)
			}
			if got := pub.GetVolumeCapability().GetMount().GetVolumeMountGroup(); got != want {
				t.Errorf("publish volume_mount_group %q, want %q", got, want)
			}
		})
	}
}
