package nodestatus

import (
	"context"
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// patchNodeStatus sends the difference between old and updated as a
// strategic merge patch of nodes/status (metadata changes ride along, spec
// changes are dropped), as upstream's PatchNodeStatus does.
func patchNodeStatus(ctx context.Context, nodes corev1client.NodeInterface, old, updated *v1.Node) (*v1.Node, error) {
	patch, err := nodeStatusPatch(old, updated)
	if err != nil {
		return nil, err
	}
	n, err := nodes.Patch(ctx, old.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return nil, fmt.Errorf("failed to patch status %q for node %q: %w", patch, old.Name, err)
	}
	return n, nil
}

func nodeStatusPatch(old, updated *v1.Node) ([]byte, error) {
	oldJSON, err := json.Marshal(old)
	if err != nil {
		return nil, fmt.Errorf("marshal node %q: %w", old.Name, err)
	}
	// status.addresses is declared patchStrategy=merge on the type field
	// "type", which would merge two InternalIPs into one: replace the list
	// explicitly when it changed.
	replaceAddresses := len(old.Status.Addresses) > 0 && !apiequality.Semantic.DeepEqual(old.Status.Addresses, updated.Status.Addresses)
	diff := updated.DeepCopy()
	diff.Spec = old.Spec
	if replaceAddresses {
		diff.Status.Addresses = old.Status.Addresses
	}
	newJSON, err := json.Marshal(diff)
	if err != nil {
		return nil, fmt.Errorf("marshal node %q: %w", old.Name, err)
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, v1.Node{})
	if err != nil {
		return nil, fmt.Errorf("create status patch for node %q: %w", old.Name, err)
	}
	if !replaceAddresses {
		return patch, nil
	}
	return withReplacedAddresses(patch, updated.Status.Addresses)
}

// withReplacedAddresses adds status.addresses with a "$patch: replace"
// directive to a patch.
func withReplacedAddresses(patch []byte, addrs []v1.NodeAddress) ([]byte, error) {
	var m map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, err
	}
	list := make([]any, 0, len(addrs)+1)
	for _, a := range addrs {
		list = append(list, map[string]any{"type": string(a.Type), "address": a.Address})
	}
	list = append(list, map[string]any{"$patch": "replace"})
	status, _ := m["status"].(map[string]any)
	if status == nil {
		status = map[string]any{}
		m["status"] = status
	}
	status["addresses"] = list
	return json.Marshal(m)
}
