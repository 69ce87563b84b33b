package dra

import (
	"bytes"
	"os"
	"testing"
)

// testdata/upstream_dra_manager_state was written by upstream's own
// checkpointer (k8s.io/kubernetes v1.34.4, pkg/kubelet/cm/dra/state):
// Skiff reads it, and writes the same claims byte for byte, so either
// kubelet reads what the other wrote.
func TestCheckpointMatchesUpstream(t *testing.T) {
	want, err := os.ReadFile("testdata/upstream_dra_manager_state")
	if err != nil {
		t.Fatal(err)
	}
	claims, err := unmarshalCheckpoint(want)
	if err != nil {
		t.Fatal(err)
	}
	if len(claims) != 1 || claims[0].ClaimName != "c1" || len(claims[0].PodUIDs) != 2 ||
		claims[0].DriverState["fake.example.com"].Devices[0].CDIDeviceIDs[0] != "vendor.com/dev=dev-0" {
		t.Fatalf("upstream checkpoint read as %+v", claims)
	}
	got, err := marshalCheckpoint(claims)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Skiff writes\n%s\nupstream wrote\n%s", got, want)
	}
	corrupt := bytes.Replace(want, []byte("dev-0"), []byte("dev-1"), 1)
	if _, err := unmarshalCheckpoint(corrupt); err == nil {
		t.Fatal("a checkpoint whose data does not match its checksum was read")
	}
}
