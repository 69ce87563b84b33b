package nodestatus

import (
	"encoding/json"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

func TestStatusPatchReplacesAddresses(t *testing.T) {
	old := &v1.Node{Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
		{Type: v1.NodeInternalIP, Address: "10.0.0.1"},
		{Type: v1.NodeHostName, Address: "a"},
	}}}
	old.Name = "a"
	updated := old.DeepCopy()
	updated.Status.Addresses = []v1.NodeAddress{
		{Type: v1.NodeInternalIP, Address: "10.0.0.2"},
		{Type: v1.NodeInternalIP, Address: "fd00::2"},
		{Type: v1.NodeHostName, Address: "a"},
	}
	updated.Spec.Unschedulable = true // spec is never patched through status
	patch, err := nodeStatusPatch(old, updated)
	if err != nil {
		t.Fatal(err)
	}
	oldJSON, _ := json.Marshal(old)
	merged, err := strategicpatch.StrategicMergePatch(oldJSON, patch, v1.Node{})
	if err != nil {
		t.Fatal(err)
	}
	var got v1.Node
	if err := json.Unmarshal(merged, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Status.Addresses, updated.Status.Addresses) {
		t.Errorf("addresses after patch = %v, want %v (patch %s)", got.Status.Addresses, updated.Status.Addresses, patch)
	}
	if got.Spec.Unschedulable {
		t.Errorf("spec patched: %s", patch)
	}
}
