package csi

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/skiff-sh/skiff/internal/pluginwatcher"
)

// fakeDriver serves a CSI node service that answers NodeGetInfo.
type fakeDriver struct {
	csipb.UnimplementedNodeServer
	info *csipb.NodeGetInfoResponse
}

func (f *fakeDriver) NodeGetInfo(context.Context, *csipb.NodeGetInfoRequest) (*csipb.NodeGetInfoResponse, error) {
	return f.info, nil
}

func serveDriver(t *testing.T, info *csipb.NodeGetInfoResponse) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "csi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "csi.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	csipb.RegisterNodeServer(srv, &fakeDriver{info: info})
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return sock
}

func TestValidate(t *testing.T) {
	d := New(Config{})
	for _, c := range []struct {
		info pluginwatcher.Info
		ok   bool
	}{
		{pluginwatcher.Info{Name: "hostpath.csi.k8s.io", Endpoint: "/csi.sock", Versions: []string{"1.0.0"}}, true},
		{pluginwatcher.Info{Name: "hostpath.csi.k8s.io", Endpoint: "/csi.sock", Versions: []string{"0.3.0", "1.2.0"}}, true},
		{pluginwatcher.Info{Name: "hostpath.csi.k8s.io", Endpoint: "/csi.sock", Versions: []string{"0.3.0"}}, false},
		{pluginwatcher.Info{Name: "../../etc", Endpoint: "/csi.sock", Versions: []string{"1.0.0"}}, false},
		{pluginwatcher.Info{Name: "a/b", Endpoint: "/csi.sock", Versions: []string{"1.0.0"}}, false},
		{pluginwatcher.Info{Name: "hostpath.csi.k8s.io", Endpoint: "csi.sock", Versions: []string{"1.0.0"}}, false},
	} {
		if err := d.Validate(c.info); (err == nil) != c.ok {
			t.Errorf("%+v: %v, want ok=%v", c.info, err, c.ok)
		}
	}
}

func TestRegisterPublishesNodeInfoAndDeregisterRemovesIt(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid", Labels: map[string]string{"a": "b"}}}
	client := fake.NewClientset(node)
	d := New(Config{NodeName: "n1", Nodes: client.CoreV1().Nodes(), CSINodes: client.StorageV1().CSINodes()})
	ctx := context.Background()
	hostpath := serveDriver(t, &csipb.NodeGetInfoResponse{NodeId: "n1", MaxVolumesPerNode: 100,
		AccessibleTopology: &csipb.Topology{Segments: map[string]string{"topology.hostpath.csi/node": "n1"}}})
	other := serveDriver(t, &csipb.NodeGetInfoResponse{NodeId: "other-id"})
	for name, ep := range map[string]string{"hostpath.csi.k8s.io": hostpath, "other.csi": other} {
		if err := d.Register(ctx, pluginwatcher.Info{Type: "CSIPlugin", Name: name, Endpoint: ep, Versions: []string{"1.0.0"}}); err != nil {
			t.Fatal(err)
		}
	}
	cn, err := client.StorageV1().CSINodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cn.OwnerReferences) != 1 || cn.OwnerReferences[0].UID != "node-uid" || cn.OwnerReferences[0].Kind != "Node" {
		t.Errorf("CSINode owners %v", cn.OwnerReferences)
	}
	byName := map[string]int{}
	for i, drv := range cn.Spec.Drivers {
		byName[drv.Name] = i
	}
	hp := cn.Spec.Drivers[byName["hostpath.csi.k8s.io"]]
	if len(cn.Spec.Drivers) != 2 || hp.NodeID != "n1" || len(hp.TopologyKeys) != 1 || hp.TopologyKeys[0] != "topology.hostpath.csi/node" ||
		hp.Allocatable == nil || *hp.Allocatable.Count != 100 {
		t.Fatalf("CSINode drivers %+v", cn.Spec.Drivers)
	}
	if o := cn.Spec.Drivers[byName["other.csi"]]; o.Allocatable != nil || o.NodeID != "other-id" {
		t.Errorf("a driver with no volume limit: %+v", o)
	}
	n, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	var ids map[string]string
	if err := json.Unmarshal([]byte(n.Annotations[NodeIDAnnotation]), &ids); err != nil || ids["hostpath.csi.k8s.io"] != "n1" || ids["other.csi"] != "other-id" {
		t.Errorf("node ID annotation %q: %v", n.Annotations[NodeIDAnnotation], err)
	}
	if n.Labels["topology.hostpath.csi/node"] != "n1" || n.Labels["a"] != "b" {
		t.Errorf("Node labels %v", n.Labels)
	}

	d.Deregister(ctx, pluginwatcher.Info{Type: "CSIPlugin", Name: "hostpath.csi.k8s.io", Endpoint: hostpath})
	cn, _ = client.StorageV1().CSINodes().Get(ctx, "n1", metav1.GetOptions{})
	if len(cn.Spec.Drivers) != 1 || cn.Spec.Drivers[0].Name != "other.csi" {
		t.Errorf("after deregistration: %+v", cn.Spec.Drivers)
	}
	n, _ = client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if got := n.Annotations[NodeIDAnnotation]; got != `{"other.csi":"other-id"}` {
		t.Errorf("annotation after deregistration %q", got)
	}
	d.Deregister(ctx, pluginwatcher.Info{Type: "CSIPlugin", Name: "other.csi", Endpoint: other})
	n, _ = client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if _, ok := n.Annotations[NodeIDAnnotation]; ok {
		t.Errorf("annotation left with no driver: %v", n.Annotations)
	}
}

func TestRegisterFailsWhenTheDriverIsUnreachable(t *testing.T) {
	client := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	d := New(Config{NodeName: "n1", Nodes: client.CoreV1().Nodes(), CSINodes: client.StorageV1().CSINodes(), CallTimeout: 2e9})
	err := d.Register(context.Background(), pluginwatcher.Info{Name: "gone.csi", Endpoint: filepath.Join(t.TempDir(), "none.sock"), Versions: []string{"1.0.0"}})
	if err == nil {
		t.Fatal("registered a driver that does not answer")
	}
	if _, err := client.StorageV1().CSINodes().Get(context.Background(), "n1", metav1.GetOptions{}); err == nil {
		t.Error("a CSINode was made for a driver that failed")
	}
}
