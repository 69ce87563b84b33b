package csi

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/pluginwatcher"
	"github.com/skiff-sh/skiff/internal/volume/mountinfo"
)

// nodeServer is a CSI node service that stages nothing on disk and
// publishes by bind-mounting a directory of its own, recording each call.
type nodeServer struct {
	csipb.UnimplementedNodeServer
	data string // what publish mounts
	// noDisk: publish and unpublish leave the disk alone (a driver
	// that mounts elsewhere), so that all a test sees on disk is
	// Skiff's doing.
	noDisk bool
	// extraCaps are node capabilities beside STAGE_UNSTAGE_VOLUME.
	extraCaps []csipb.NodeServiceCapability_RPC_Type
	// linkBlock: a block publish makes the target a symlink.
	linkBlock bool
	mu        sync.Mutex
	log       []string
	reqs      []any
}

func (s *nodeServer) record(call string, req any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, call)
	s.reqs = append(s.reqs, req)
}

func (s *nodeServer) calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.log...)
}

func (s *nodeServer) last(call string) any {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.log) - 1; i >= 0; i-- {
		if s.log[i] == call {
			return s.reqs[i]
		}
	}
	return nil
}

func (s *nodeServer) NodeGetInfo(context.Context, *csipb.NodeGetInfoRequest) (*csipb.NodeGetInfoResponse, error) {
	return &csipb.NodeGetInfoResponse{NodeId: "n1"}, nil
}

func (s *nodeServer) NodeGetCapabilities(_ context.Context, r *csipb.NodeGetCapabilitiesRequest) (*csipb.NodeGetCapabilitiesResponse, error) {
	s.record("NodeGetCapabilities", r)
	var caps []*csipb.NodeServiceCapability
	for _, c := range append([]csipb.NodeServiceCapability_RPC_Type{csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME}, s.extraCaps...) {
		caps = append(caps, &csipb.NodeServiceCapability{Type: &csipb.NodeServiceCapability_Rpc{Rpc: &csipb.NodeServiceCapability_RPC{Type: c}}})
	}
	return &csipb.NodeGetCapabilitiesResponse{Capabilities: caps}, nil
}

func (s *nodeServer) NodeStageVolume(_ context.Context, r *csipb.NodeStageVolumeRequest) (*csipb.NodeStageVolumeResponse, error) {
	s.record("NodeStageVolume", r)
	return &csipb.NodeStageVolumeResponse{}, nil
}

func (s *nodeServer) NodeUnstageVolume(_ context.Context, r *csipb.NodeUnstageVolumeRequest) (*csipb.NodeUnstageVolumeResponse, error) {
	s.record("NodeUnstageVolume", r)
	return &csipb.NodeUnstageVolumeResponse{}, nil
}

func (s *nodeServer) NodePublishVolume(_ context.Context, r *csipb.NodePublishVolumeRequest) (*csipb.NodePublishVolumeResponse, error) {
	s.record("NodePublishVolume", r)
	if s.noDisk {
		return &csipb.NodePublishVolumeResponse{}, nil
	}
	if r.GetVolumeCapability().GetBlock() != nil {
		return &csipb.NodePublishVolumeResponse{}, s.publishBlock(r.TargetPath)
	}
	if err := os.MkdirAll(r.TargetPath, 0o750); err != nil {
		return nil, err
	}
	if err := unix.Mount(s.data, r.TargetPath, "", unix.MS_BIND, ""); err != nil {
		return nil, err
	}
	return &csipb.NodePublishVolumeResponse{}, nil
}

func (s *nodeServer) NodeUnpublishVolume(_ context.Context, r *csipb.NodeUnpublishVolumeRequest) (*csipb.NodeUnpublishVolumeResponse, error) {
	s.record("NodeUnpublishVolume", r)
	if s.noDisk {
		return &csipb.NodeUnpublishVolumeResponse{}, nil
	}
	if err := unix.Unmount(r.TargetPath, 0); err != nil && err != unix.EINVAL && err != unix.ENOENT {
		return nil, err
	}
	if st, err := os.Lstat(r.TargetPath); err == nil && !st.IsDir() { // a block target: the driver removes it
		if err := os.Remove(r.TargetPath); err != nil {
			return nil, err
		}
	}
	return &csipb.NodeUnpublishVolumeResponse{}, nil
}

func (s *nodeServer) NodeExpandVolume(_ context.Context, r *csipb.NodeExpandVolumeRequest) (*csipb.NodeExpandVolumeResponse, error) {
	s.record("NodeExpandVolume", r)
	return &csipb.NodeExpandVolumeResponse{CapacityBytes: r.GetCapacityRange().GetRequiredBytes()}, nil
}

const testDriver = "fake.csi.test"

// fixture is a registry with the fake driver registered and a CSIDriver
// object as given.
type fixture struct {
	d    *Drivers
	srv  *nodeServer
	sock string
	root string
}

func newFixture(t *testing.T, spec *storagev1.CSIDriverSpec) *fixture {
	t.Helper()
	dir, err := os.MkdirTemp("", "csim")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, mp := range mountinfo.Under(dir) {
			_ = unix.Unmount(mp, unix.MNT_DETACH)
		}
		os.RemoveAll(dir)
	})
	f := &fixture{srv: &nodeServer{data: filepath.Join(dir, "data")}, sock: filepath.Join(dir, "csi.sock"), root: filepath.Join(dir, "root")}
	if err := os.MkdirAll(f.srv.data, 0o750); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", f.sock)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	csipb.RegisterNodeServer(g, f.srv)
	go func() { _ = g.Serve(l) }()
	t.Cleanup(g.Stop)
	client := fake.NewClientset()
	if spec != nil {
		obj := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: testDriver}, Spec: *spec}
		if _, err := client.StorageV1().CSIDrivers().Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f.d = f.newDrivers(t, client)
	return f
}

// newDrivers is a registry over the same root, as after a restart.
func (f *fixture) newDrivers(t *testing.T, client *fake.Clientset) *Drivers {
	t.Helper()
	d := New(Config{NodeName: "n1", RootDir: f.root, CSIDrivers: client.StorageV1().CSIDrivers()})
	if err := d.Register(context.Background(), pluginwatcher.Info{Name: testDriver, Endpoint: f.sock, Versions: []string{"1.0.0"}}); err != nil {
		t.Fatal(err)
	}
	return d
}

func testPod(uid string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, Namespace: "ns", UID: types.UID("uid-" + uid)},
		Spec: v1.PodSpec{ServiceAccountName: "sa"}}
}

func (f *fixture) podDir(p *v1.Pod) string { return filepath.Join(f.root, "pods", string(p.UID)) }

var hostpathLike = &storagev1.CSIDriverSpec{AttachRequired: ptr.To(false), PodInfoOnMount: ptr.To(true),
	VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral}}

func TestPersistentVolumeStagedOncePublishedPerPodUnstagedLast(t *testing.T) {
	f := newFixture(t, hostpathLike)
	ctx := context.Background()
	vol := Volume{SpecName: "pv-1", Driver: testDriver, Handle: "vol-1", FSType: "ext4", AccessMode: v1.ReadWriteOnce,
		Attributes: map[string]string{"kind": "fast"}}
	a, b := testPod("a"), testPod("b")
	targetA, err := f.d.SetUp(ctx, a, f.podDir(a), vol)
	if err != nil {
		t.Fatal(err)
	}
	staging := filepath.Join(f.root, "plugins/kubernetes.io/csi", testDriver, fmt.Sprintf("%x", sha256.Sum256([]byte("vol-1"))), "globalmount")
	wantTarget := filepath.Join(f.podDir(a), "volumes/kubernetes.io~csi/pv-1/mount")
	if targetA != wantTarget || !mountinfo.IsMountPoint(targetA) {
		t.Fatalf("target %s (mounted %v), want %s", targetA, mountinfo.IsMountPoint(targetA), wantTarget)
	}
	stage := f.srv.last("NodeStageVolume").(*csipb.NodeStageVolumeRequest)
	if stage.StagingTargetPath != staging || stage.VolumeId != "vol-1" || stage.VolumeContext["kind"] != "fast" ||
		stage.VolumeCapability.GetMount().GetFsType() != "ext4" {
		t.Errorf("stage request %v", stage)
	}
	pub := f.srv.last("NodePublishVolume").(*csipb.NodePublishVolumeRequest)
	wantCtx := map[string]string{"kind": "fast", "csi.storage.k8s.io/pod.name": "p-a", "csi.storage.k8s.io/pod.namespace": "ns",
		"csi.storage.k8s.io/pod.uid": "uid-a", "csi.storage.k8s.io/serviceAccount.name": "sa", "csi.storage.k8s.io/ephemeral": "false"}
	if pub.StagingTargetPath != staging || pub.TargetPath != wantTarget || fmt.Sprint(pub.VolumeContext) != fmt.Sprint(wantCtx) ||
		pub.VolumeCapability.GetAccessMode().GetMode() != csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER {
		t.Errorf("publish request %v", pub)
	}
	var vd map[string]string
	b1, _ := os.ReadFile(filepath.Join(filepath.Dir(wantTarget), "vol_data.json"))
	if err := json.Unmarshal(b1, &vd); err != nil || vd["specVolID"] != "pv-1" || vd["volumeHandle"] != "vol-1" ||
		vd["driverName"] != testDriver || vd["nodeName"] != "n1" || vd["volumeLifecycleMode"] != "Persistent" {
		t.Errorf("vol_data.json %s: %v", b1, err)
	}

	// After a restart, before the driver registers again, a published
	// volume is found on disk.
	restarted := New(Config{NodeName: "n1", RootDir: f.root})
	if got, err := restarted.SetUp(ctx, a, f.podDir(a), vol); err != nil || got != targetA {
		t.Fatalf("set up again after a restart: %s, %v", got, err)
	}
	if _, err := f.d.SetUp(ctx, b, f.podDir(b), vol); err != nil {
		t.Fatal(err)
	}
	// Upstream asks three times before each stage and publish: whether
	// the driver stages, whether it applies the fsGroup itself, and how
	// it maps access modes (SINGLE_NODE_MULTI_WRITER).
	if got := strings.Join(f.srv.calls(), ","); got != strings.Repeat("NodeGetCapabilities,", 3)+"NodeStageVolume,"+
		strings.Repeat("NodeGetCapabilities,", 3)+"NodePublishVolume,"+strings.Repeat("NodeGetCapabilities,", 3)+"NodePublishVolume" {
		t.Errorf("calls for two pods: %s", got)
	}
	if err := f.d.TearDownPod(ctx, f.podDir(a)); err != nil {
		t.Fatal(err)
	}
	if got := f.srv.calls(); got[len(got)-1] != "NodeUnpublishVolume" {
		t.Errorf("the first pod's teardown unstaged a volume in use: %v", got)
	}
	// A restarted Skiff tears the second pod down from what is on disk.
	restarted = f.newDrivers(t, fake.NewClientset())
	if err := restarted.TearDownPod(ctx, f.podDir(b)); err != nil {
		t.Fatal(err)
	}
	calls := f.srv.calls()
	if got := strings.Join(calls[len(calls)-3:], ","); got != "NodeUnpublishVolume,NodeGetCapabilities,NodeUnstageVolume" {
		t.Errorf("last pod's teardown: %v", calls)
	}
	if _, err := os.Stat(filepath.Dir(staging)); !os.IsNotExist(err) {
		t.Errorf("staging directory left: %v", err)
	}
	if mps := mountinfo.Under(f.root); len(mps) != 0 {
		t.Errorf("mounts left: %v", mps)
	}
}

func TestInlineVolume(t *testing.T) {
	f := newFixture(t, hostpathLike)
	pod := testPod("i")
	vol := Volume{SpecName: "scratch", Driver: testDriver, Inline: true, AccessMode: v1.ReadWriteOnce}
	if _, err := f.d.SetUp(context.Background(), pod, f.podDir(pod), vol); err != nil {
		t.Fatal(err)
	}
	pub := f.srv.last("NodePublishVolume").(*csipb.NodePublishVolumeRequest)
	if want := fmt.Sprintf("csi-%x", sha256.Sum256([]byte("uid-iscratch"))); pub.VolumeId != want || pub.StagingTargetPath != "" ||
		pub.VolumeContext["csi.storage.k8s.io/ephemeral"] != "true" {
		t.Errorf("publish request %v", pub)
	}
	if f.srv.last("NodeStageVolume") != nil {
		t.Error("an inline volume was staged")
	}
	if err := f.d.TearDownPod(context.Background(), f.podDir(pod)); err != nil {
		t.Fatal(err)
	}
	if f.srv.last("NodeUnstageVolume") != nil || f.srv.last("NodeUnpublishVolume") == nil {
		t.Errorf("inline teardown calls %v", f.srv.calls())
	}
}

func TestRefusals(t *testing.T) {
	ctx := context.Background()
	persistent := Volume{SpecName: "pv", Driver: testDriver, Handle: "h"}
	inline := Volume{SpecName: "v", Driver: testDriver, Inline: true}
	for _, c := range []struct {
		name string
		spec *storagev1.CSIDriverSpec
		vol  Volume
		want string
	}{
		{"no CSIDriver object", nil, persistent, "requires attachment"},
		{"attachRequired", &storagev1.CSIDriverSpec{AttachRequired: ptr.To(true)}, persistent, "requires attachment"},
		{"inline without the Ephemeral mode", &storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)}, inline, `volume mode "Ephemeral" not supported`},
		{"not registered", hostpathLike, Volume{SpecName: "pv", Driver: "other.csi", Handle: "h"}, "other.csi not found in the list of registered CSI drivers"},
	} {
		f := newFixture(t, c.spec)
		pod := testPod("r")
		if _, err := f.d.SetUp(ctx, pod, f.podDir(pod), c.vol); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
		if len(f.srv.calls()) != 0 {
			t.Errorf("%s: the driver was called: %v", c.name, f.srv.calls())
		}
	}
}

// Access modes as upstream maps them: ReadWriteOnce and ReadWriteOncePod
// to the single-node multi-writer modes only for a driver with the
// SINGLE_NODE_MULTI_WRITER node capability, in stage and publish alike.
func TestAccessModeFollowsSingleNodeMultiWriterCapability(t *testing.T) {
	const (
		writer       = csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
		multiWriter  = csipb.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER
		singleWriter = csipb.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER
	)
	for _, tc := range []struct {
		mode    v1.PersistentVolumeAccessMode
		capable bool
		want    csipb.VolumeCapability_AccessMode_Mode
	}{
		{v1.ReadWriteOnce, false, writer},
		{v1.ReadWriteOnce, true, multiWriter},
		{v1.ReadWriteOncePod, false, writer},
		{v1.ReadWriteOncePod, true, singleWriter},
		{v1.ReadOnlyMany, true, csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY},
		{v1.ReadWriteMany, false, csipb.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
	} {
		t.Run(fmt.Sprintf("%s/%v", tc.mode, tc.capable), func(t *testing.T) {
			f := newFixture(t, hostpathLike)
			if tc.capable {
				f.srv.extraCaps = []csipb.NodeServiceCapability_RPC_Type{csipb.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER}
			}
			pod := testPod("a")
			vol := Volume{SpecName: "pv", Driver: testDriver, Handle: "vol", AccessMode: tc.mode}
			if _, err := f.d.SetUp(context.Background(), pod, f.podDir(pod), vol); err != nil {
				t.Fatal(err)
			}
			stage := f.srv.last("NodeStageVolume").(*csipb.NodeStageVolumeRequest)
			pub := f.srv.last("NodePublishVolume").(*csipb.NodePublishVolumeRequest)
			if got := stage.GetVolumeCapability().GetAccessMode().GetMode(); got != tc.want {
				t.Errorf("stage access mode %s, want %s", got, tc.want)
			}
			if got := pub.GetVolumeCapability().GetAccessMode().GetMode(); got != tc.want {
				t.Errorf("publish access mode %s, want %s", got, tc.want)
			}
			if err := f.d.TearDownPod(context.Background(), f.podDir(pod)); err != nil {
				t.Fatal(err)
			}
		})
	}
}
