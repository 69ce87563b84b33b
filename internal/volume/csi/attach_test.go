package csi

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/pluginwatcher"
	"github.com/skiff-sh/skiff/internal/volume/volerr"
)

// attachNode is the Node as the apiserver has it, which a test edits as
// Skiff's status posts and the attach/detach controller would.
type attachNode struct {
	mu    sync.Mutex
	node  v1.Node
	kicks atomic.Int32 // status posts asked for
}

func (n *attachNode) get() (*v1.Node, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.node.DeepCopy(), true
}

func (n *attachNode) edit(fn func(*v1.NodeStatus)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	fn(&n.node.Status)
}

// attachDrivers is a registry of the fixture's driver with a cluster:
// the client's CSIDrivers and VolumeAttachments, and the node.
func (f *fixture) attachDrivers(t *testing.T, client *fake.Clientset, node *attachNode) *Drivers {
	t.Helper()
	d := New(Config{NodeName: "n1", RootDir: f.root, CSIDrivers: client.StorageV1().CSIDrivers(),
		VolumeAttachments: client.StorageV1().VolumeAttachments(), Node: node.get,
		InUseChanged: func() { node.kicks.Add(1) }})
	must(t, d.Register(context.Background(), pluginwatcher.Info{Name: testDriver, Endpoint: f.sock, Versions: []string{"1.0.0"}}))
	return d
}

// setUpFails sets the volume up, which must fail with want in the error,
// pending or not, and without calling the driver's stage or publish.
func setUpFails(t *testing.T, f *fixture, d *Drivers, pod *v1.Pod, vol Volume, want string, pending bool) {
	t.Helper()
	_, err := d.SetUp(context.Background(), pod, f.podDir(pod), vol)
	step, q := volerr.Of(err)
	if err == nil || !strings.Contains(err.Error(), want) || q != pending || (!pending && step != "MountVolume.WaitForAttach") {
		t.Fatalf("set up: %v (step %q, pending %v), want %q (pending %v)", err, step, q, want, pending)
	}
	if f.srv.last("NodeStageVolume") != nil || f.srv.last("NodePublishVolume") != nil {
		t.Fatalf("the driver staged or published an unattached volume: %v", f.srv.calls())
	}
}

// With no CSIDriver object (upstream's default: attachment required),
// a PV's volume is staged only once it is in the Node's volumesInUse,
// in its volumesAttached, and its VolumeAttachment (upstream's name) is
// attached; the attachment's metadata is the publish context of stage
// and publish. Until then each attempt fails, pending while the node
// status lacks it; the attacher's error and an attachment being deleted
// are named. The volume stays in use until it is unstaged.
func TestAttachedVolumeWaitsForTheVolumeAttachment(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	client := fake.NewClientset()
	node := &attachNode{}
	d := f.attachDrivers(t, client, node)
	pod := testPod("att")
	vol := Volume{SpecName: "pv-a", Driver: testDriver, Handle: "disk-7", AccessMode: v1.ReadWriteOnce}
	name := v1.UniqueVolumeName("kubernetes.io/csi/" + testDriver + "^disk-7")

	setUpFails(t, f, d, pod, vol, "has not been added to the list of VolumesInUse", true)
	if got := d.VolumesInUse(ctx); len(got) != 1 || got[0] != name {
		t.Fatalf("volumesInUse %v, want [%s]", got, name)
	}
	if node.kicks.Load() != 1 {
		t.Errorf("status posts asked for: %d, want 1", node.kicks.Load())
	}
	node.edit(func(s *v1.NodeStatus) { s.VolumesInUse = []v1.UniqueVolumeName{name} })
	setUpFails(t, f, d, pod, vol, "is not attached according to node status", true)
	node.edit(func(s *v1.NodeStatus) { s.VolumesAttached = []v1.AttachedVolume{{Name: name}} })
	setUpFails(t, f, d, pod, vol, "has GET error for volume attachment", false)

	vaName := fmt.Sprintf("csi-%x", sha256.Sum256([]byte("disk-7"+testDriver+"n1")))
	va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: vaName},
		Status: storagev1.VolumeAttachmentStatus{AttachError: &storagev1.VolumeError{Message: "rpc error: disk busy"}}}
	_, err := client.StorageV1().VolumeAttachments().Create(ctx, va, metav1.CreateOptions{})
	must(t, err)
	setUpFails(t, f, d, pod, vol, "rpc error: disk busy", false)
	va.Status = storagev1.VolumeAttachmentStatus{}
	_, err = client.StorageV1().VolumeAttachments().Update(ctx, va, metav1.UpdateOptions{})
	must(t, err)
	setUpFails(t, f, d, pod, vol, "not attached yet", false)

	va.Status = storagev1.VolumeAttachmentStatus{Attached: true, AttachmentMetadata: map[string]string{"devicePath": "/dev/vdb"}}
	_, err = client.StorageV1().VolumeAttachments().Update(ctx, va, metav1.UpdateOptions{})
	must(t, err)
	if _, err := d.SetUp(ctx, pod, f.podDir(pod), vol); err != nil {
		t.Fatal(err)
	}
	stage := f.srv.last("NodeStageVolume").(*csipb.NodeStageVolumeRequest)
	pub := f.srv.last("NodePublishVolume").(*csipb.NodePublishVolumeRequest)
	if stage.PublishContext["devicePath"] != "/dev/vdb" || pub.PublishContext["devicePath"] != "/dev/vdb" {
		t.Errorf("publish context of stage %v and publish %v, want the attachment's metadata", stage.PublishContext, pub.PublishContext)
	}

	// A second pod: the attachment is checked again; one going away
	// fails the setup.
	va.DeletionTimestamp = ptr.To(metav1.Now())
	_, err = client.StorageV1().VolumeAttachments().Update(ctx, va, metav1.UpdateOptions{})
	must(t, err)
	if _, err := d.SetUp(ctx, testPod("two"), f.podDir(testPod("two")), vol); err == nil ||
		!strings.Contains(err.Error(), "volume attachment is being deleted") {
		t.Errorf("set up with the attachment being deleted: %v", err)
	}
	must(t, d.TearDownPod(ctx, f.podDir(testPod("two"))))
	if got := d.VolumesInUse(ctx); len(got) != 1 || got[0] != name {
		t.Fatalf("volumesInUse while the first pod has it %v, want [%s]", got, name)
	}
	must(t, d.TearDownPod(ctx, f.podDir(pod)))
	if f.srv.last("NodeUnstageVolume") == nil {
		t.Fatalf("not unstaged: %v", f.srv.calls())
	}
	if got := d.VolumesInUse(ctx); len(got) != 0 {
		t.Errorf("volumesInUse after the unstage %v, want none", got)
	}
	if node.kicks.Load() < 2 {
		t.Errorf("no status post asked for after the teardown")
	}
}

// A restarted Skiff (nothing in memory) reports in use the volumes it
// finds staged or published on disk whose driver needs attachment, and
// not those of a driver that needs none.
func TestVolumesInUseFoundOnDiskForAttachableDriversOnly(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		spec *storagev1.CSIDriverSpec
		want int
	}{
		{"attachRequired", &storagev1.CSIDriverSpec{AttachRequired: ptr.To(true)}, 1},
		{"no attachment", hostpathLike, 0},
	} {
		f := newFixture(t, nil)
		client := fake.NewClientset()
		node := &attachNode{}
		name := UniqueVolumeName(testDriver, "disk-9")
		node.node.Status.VolumesInUse = []v1.UniqueVolumeName{name}
		node.node.Status.VolumesAttached = []v1.AttachedVolume{{Name: name}}
		_, err := client.StorageV1().VolumeAttachments().Create(ctx, &storagev1.VolumeAttachment{
			ObjectMeta: metav1.ObjectMeta{Name: attachmentName("disk-9", testDriver, "n1")},
			Status:     storagev1.VolumeAttachmentStatus{Attached: true}}, metav1.CreateOptions{})
		must(t, err)
		pod := testPod("disk")
		vol := Volume{SpecName: "pv-d", Driver: testDriver, Handle: "disk-9", AccessMode: v1.ReadWriteOnce}
		if _, err := f.attachDrivers(t, client, node).SetUp(ctx, pod, f.podDir(pod), vol); err != nil {
			t.Fatal(err)
		}
		obj := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: testDriver}, Spec: *c.spec}
		_, err = client.StorageV1().CSIDrivers().Create(ctx, obj, metav1.CreateOptions{})
		must(t, err)
		restarted := New(Config{NodeName: "n1", RootDir: f.root, CSIDrivers: client.StorageV1().CSIDrivers()})
		if got := restarted.VolumesInUse(ctx); len(got) != c.want || (c.want == 1 && got[0] != name) {
			t.Errorf("%s: volumesInUse after a restart %v, want %d of %s", c.name, got, c.want, name)
		}
		must(t, f.attachDrivers(t, client, node).TearDownPod(ctx, f.podDir(pod)))
	}
}
