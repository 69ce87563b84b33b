package csi

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// publishBlock makes the target a block device node (loop0's numbers),
// as a driver that creates the device file; with linkBlock, a symlink
// to such a node elsewhere instead.
func (s *nodeServer) publishBlock(target string) error {
	if !s.linkBlock {
		return unix.Mknod(target, unix.S_IFBLK|0o600, int(unix.Mkdev(7, 0)))
	}
	node := filepath.Join(s.data, "dev")
	if err := unix.Mknod(node, unix.S_IFBLK|0o600, int(unix.Mkdev(7, 0))); err != nil && err != unix.EEXIST {
		return err
	}
	return os.Symlink(node, target)
}

// A block volume is staged once into upstream's volumeDevices staging
// path with a block capability, published per pod into a file of the
// publish directory, recorded (vol_data.json by spec name, a symlink in
// the pod's directory), found again after a restart without the driver,
// and unpublished per pod, unstaged with the last one, leaving nothing.
func TestBlockVolumeStagedPublishedPerPodUnstagedLast(t *testing.T) {
	f := newFixture(t, hostpathLike)
	ctx := context.Background()
	vol := Volume{SpecName: "pv-b", Driver: testDriver, Handle: "vol-b", AccessMode: v1.ReadWriteOnce, Block: true,
		Attributes: map[string]string{"kind": "raw"}}
	a, b := testPod("a"), testPod("b")
	devA, err := f.d.SetUp(ctx, a, f.podDir(a), vol)
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(f.root, "plugins/kubernetes.io/csi/volumeDevices")
	if want := filepath.Join(base, "publish/pv-b/uid-a"); devA != want {
		t.Fatalf("device %s, want %s", devA, want)
	}
	stage := f.srv.last("NodeStageVolume").(*csipb.NodeStageVolumeRequest)
	if stage.StagingTargetPath != filepath.Join(base, "staging/pv-b") || stage.VolumeCapability.GetBlock() == nil ||
		stage.VolumeCapability.GetMount() != nil || stage.VolumeContext["kind"] != "raw" {
		t.Errorf("stage request %v", stage)
	}
	pub := f.srv.last("NodePublishVolume").(*csipb.NodePublishVolumeRequest)
	if pub.TargetPath != devA || pub.StagingTargetPath != stage.StagingTargetPath || pub.VolumeCapability.GetBlock() == nil ||
		pub.VolumeContext["csi.storage.k8s.io/pod.uid"] != "uid-a" {
		t.Errorf("publish request %v", pub)
	}
	var vd map[string]string
	raw, _ := os.ReadFile(filepath.Join(base, "pv-b/data/vol_data.json"))
	if err := json.Unmarshal(raw, &vd); err != nil || vd["specVolID"] != "pv-b" || vd["volumeHandle"] != "vol-b" || vd["driverName"] != testDriver {
		t.Errorf("vol_data.json %s: %v", raw, err)
	}
	link := filepath.Join(f.podDir(a), "volumeDevices/kubernetes.io~csi/pv-b")
	if got, err := os.Readlink(link); err != nil || got != devA {
		t.Errorf("pod's symlink %s -> %s (%v), want %s", link, got, err, devA)
	}

	// Found on disk after a restart, before the driver registers.
	if got, err := New(Config{NodeName: "n1", RootDir: f.root}).SetUp(ctx, a, f.podDir(a), vol); err != nil || got != devA {
		t.Fatalf("set up again after a restart: %s, %v", got, err)
	}
	if _, err := f.d.SetUp(ctx, b, f.podDir(b), vol); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.srv.calls(), ","); got != "NodeGetCapabilities,NodeGetCapabilities,NodeStageVolume,NodeGetCapabilities,NodePublishVolume,"+
		"NodeGetCapabilities,NodeGetCapabilities,NodePublishVolume" {
		t.Errorf("calls for two pods: %s", got)
	}
	if err := f.d.TearDownPod(ctx, f.podDir(a)); err != nil {
		t.Fatal(err)
	}
	if got := f.srv.calls(); got[len(got)-1] != "NodeUnpublishVolume" {
		t.Errorf("the first pod's teardown unstaged a volume in use: %v", got)
	}
	if _, err := os.Lstat(devA); !os.IsNotExist(err) {
		t.Errorf("the first pod's device file is left: %v", err)
	}
	if err := f.newDrivers(t, fake.NewClientset()).TearDownPod(ctx, f.podDir(b)); err != nil {
		t.Fatal(err)
	}
	calls := f.srv.calls()
	if got := strings.Join(calls[len(calls)-3:], ","); got != "NodeUnpublishVolume,NodeGetCapabilities,NodeUnstageVolume" {
		t.Errorf("last pod's teardown: %v", calls)
	}
	for _, left := range []string{"staging/pv-b", "publish/pv-b", "pv-b"} {
		if _, err := os.Lstat(filepath.Join(base, left)); !os.IsNotExist(err) {
			t.Errorf("%s left: %v", left, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(f.podDir(b), "volumeDevices/kubernetes.io~csi/pv-b")); !os.IsNotExist(err) {
		t.Errorf("the pod's symlink is left: %v", err)
	}
}

// A driver that publishes a symlink (to a block device, wherever it
// leads) is refused: the path handed to the runtime must be the device
// itself, reached without following a link.
func TestBlockPublishOfASymlinkRefused(t *testing.T) {
	f := newFixture(t, hostpathLike)
	f.srv.linkBlock = true
	pod := testPod("l")
	vol := Volume{SpecName: "pv-l", Driver: testDriver, Handle: "vol-l", Block: true}
	if _, err := f.d.SetUp(context.Background(), pod, f.podDir(pod), vol); err == nil || !strings.Contains(err.Error(), "is not a block device") {
		t.Fatalf("a symlinked publish target: %v", err)
	}
	// The pod's teardown undoes what the driver did.
	if err := f.d.TearDownPod(context.Background(), f.podDir(pod)); err != nil {
		t.Fatal(err)
	}
	if f.srv.last("NodeUnpublishVolume") == nil || f.srv.last("NodeUnstageVolume") == nil {
		t.Errorf("teardown of a refused device: %v", f.srv.calls())
	}
	for _, left := range []string{"staging/pv-l", "publish/pv-l", "pv-l"} {
		if _, err := os.Lstat(filepath.Join(f.root, "plugins/kubernetes.io/csi/volumeDevices", left)); !os.IsNotExist(err) {
			t.Errorf("%s left: %v", left, err)
		}
	}
}

// A driver that swaps the volumeDevices directory, or the pod's
// volumeDevices directory, for a symlink to a host directory gets
// nothing made there: Skiff refuses the symlink and the pod waits.
func TestBlockDirectoriesSwappedForSymlinksRefused(t *testing.T) {
	ctx := context.Background()
	for _, swapped := range []string{"plugins/kubernetes.io/csi/volumeDevices", "pods/uid-s/volumeDevices"} {
		f := newFixture(t, hostpathLike)
		outside := t.TempDir()
		link := filepath.Join(f.root, swapped)
		if err := os.MkdirAll(filepath.Dir(link), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, link); err != nil {
			t.Fatal(err)
		}
		pod := testPod("s")
		vol := Volume{SpecName: "pv-s", Driver: testDriver, Handle: "vol-s", Block: true}
		if _, err := f.d.SetUp(ctx, pod, f.podDir(pod), vol); err == nil || !strings.Contains(err.Error(), "symlink") {
			t.Errorf("%s a symlink: set up %v", swapped, err)
		}
		if entries, _ := os.ReadDir(outside); len(entries) != 0 {
			t.Errorf("%s a symlink: made %v outside the root", swapped, entries)
		}
		if f.srv.last("NodePublishVolume") != nil {
			t.Errorf("%s a symlink: the driver was asked to publish", swapped)
		}
	}
}
