package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// testdata/upstream_checkpoint was written by the upstream kubelet's own
// code (k8s.io/kubernetes v1.34.4, pkg/kubelet/cm/devicemanager/checkpoint
// through its checkpointmanager) from the entries below.
func upstreamEntries(t *testing.T) Checkpoint {
	t.Helper()
	resp, err := proto.Marshal(&pluginapi.ContainerAllocateResponse{
		Envs:        map[string]string{"A": "1"},
		Mounts:      []*pluginapi.Mount{{ContainerPath: "/tmp/Dev-1", HostPath: "/tmp/Dev-1"}},
		Devices:     []*pluginapi.DeviceSpec{{ContainerPath: "/dev/x", HostPath: "/dev/null", Permissions: "rw"}},
		Annotations: map[string]string{"k": "v"},
		CdiDevices:  []*pluginapi.CDIDevice{{Name: "example.com/resource=CDI-Dev-1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return Checkpoint{
		Entries: []PodDevicesEntry{{PodUID: "uid-1", ContainerName: "main", ResourceName: "example.com/resource",
			DeviceIDs: DevicesPerNUMA{-1: {"Dev-1"}, 0: {"Dev-3", "Dev-2"}}, AllocResp: resp}},
		Registered: map[string][]string{"example.com/resource": {"Dev-1", "Dev-2", "Dev-3"}, "example.com/other": {}},
	}
}

func TestReadsUpstreamCheckpoint(t *testing.T) {
	if _, err := Read(t.TempDir()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Read of a directory without a checkpoint: %v, want ErrNotFound", err)
	}
	b, err := os.ReadFile("testdata/upstream_checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	cp, err := Unmarshal(b)
	if err != nil {
		t.Fatalf("upstream's checkpoint does not verify: %v", err)
	}
	if want := upstreamEntries(t); !reflect.DeepEqual(cp, want) {
		t.Errorf("read %+v, want %+v", cp, want)
	}
}

func TestWritesUpstreamBytes(t *testing.T) {
	want, err := os.ReadFile("testdata/upstream_checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := Write(dir, upstreamEntries(t)); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("wrote\n%s\nupstream writes\n%s", got, want)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the directory holds %d files, want only the checkpoint (no temporary left)", len(entries))
	}
}

func TestRejectsCorruptCheckpoint(t *testing.T) {
	b, err := os.ReadFile("testdata/upstream_checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	tampered := strings.Replace(string(b), `"-1":["Dev-1"]`, `"-1":["Dev-9"]`, 1)
	if tampered == string(b) {
		t.Fatal("the tampering did not apply")
	}
	if _, err := Unmarshal([]byte(tampered)); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("a tampered checkpoint gave %v, want a checksum error", err)
	}
	if _, err := Unmarshal([]byte("{garbage")); err == nil {
		t.Error("garbage decoded without error")
	}
}

func TestEmptyCheckpointRoundTrips(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, Checkpoint{}); err != nil {
		t.Fatal(err)
	}
	cp, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(cp.Entries) != 0 || len(cp.Registered) != 0 {
		t.Errorf("empty checkpoint read back as %+v", cp)
	}
}
