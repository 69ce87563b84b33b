package csi

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	storagev1client "k8s.io/client-go/kubernetes/typed/storage/v1"
	"k8s.io/client-go/util/retry"
)

// NodeIDAnnotation maps driver names to their node IDs on the Node, as
// upstream; the attach-detach controller and external-attacher read it.
const NodeIDAnnotation = "csi.volume.kubernetes.io/nodeid"

// nodeInfoManager publishes what registered drivers say of this node: the
// driver in the CSINode object (node ID, topology keys, volume limit),
// its node ID in the Node's annotation and its topology segments as Node
// labels, as upstream's nodeinfomanager.
type nodeInfoManager struct {
	nodeName string
	nodes    corev1client.NodeInterface
	csiNodes storagev1client.CSINodeInterface
}

// install adds or replaces the driver on the Node and in the CSINode.
func (m *nodeInfoManager) install(ctx context.Context, driver string, info nodeInfo) error {
	node, err := m.nodes.Get(ctx, m.nodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get Node %s: %w", m.nodeName, err)
	}
	ids, err := nodeIDs(node)
	if err != nil {
		return err
	}
	ids[driver] = info.nodeID
	if err := m.patchNode(ctx, ids, info.topology); err != nil {
		return err
	}
	entry := storagev1.CSINodeDriver{Name: driver, NodeID: info.nodeID, TopologyKeys: slices.Sorted(maps.Keys(info.topology))}
	if info.maxVolumes > 0 {
		count := int32(min(info.maxVolumes, math.MaxInt32))
		entry.Allocatable = &storagev1.VolumeNodeResources{Count: &count}
	}
	return m.updateCSINode(ctx, node, func(drivers []storagev1.CSINodeDriver) []storagev1.CSINodeDriver {
		return append(withoutDriver(drivers, driver), entry)
	})
}

// uninstall removes the driver from the CSINode and the Node's annotation;
// its topology labels stay, as upstream.
func (m *nodeInfoManager) uninstall(ctx context.Context, driver string) error {
	node, err := m.nodes.Get(ctx, m.nodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get Node %s: %w", m.nodeName, err)
	}
	ids, err := nodeIDs(node)
	if err != nil {
		return err
	}
	if _, ok := ids[driver]; ok {
		delete(ids, driver)
		if err := m.patchNode(ctx, ids, nil); err != nil {
			return err
		}
	}
	return m.updateCSINode(ctx, node, func(drivers []storagev1.CSINodeDriver) []storagev1.CSINodeDriver {
		return withoutDriver(drivers, driver)
	})
}

func nodeIDs(node *v1.Node) (map[string]string, error) {
	ids := map[string]string{}
	if s, ok := node.Annotations[NodeIDAnnotation]; ok && s != "" {
		if err := json.Unmarshal([]byte(s), &ids); err != nil {
			return nil, fmt.Errorf("annotation %s of Node %s: %w", NodeIDAnnotation, node.Name, err)
		}
	}
	return ids, nil
}

// patchNode sets the node ID annotation (removed when empty) and adds the
// topology labels, in one merge patch of the Node's metadata.
func (m *nodeInfoManager) patchNode(ctx context.Context, ids, labels map[string]string) error {
	var annotation any // null removes it
	if len(ids) > 0 {
		b, err := json.Marshal(ids)
		if err != nil {
			return err
		}
		annotation = string(b)
	}
	meta := map[string]any{"annotations": map[string]any{NodeIDAnnotation: annotation}}
	if len(labels) > 0 {
		meta["labels"] = labels
	}
	patch, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return err
	}
	if _, err := m.nodes.Patch(ctx, m.nodeName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patch Node %s: %w", m.nodeName, err)
	}
	return nil
}

// updateCSINode applies change to the CSINode's drivers, creating the
// CSINode (owned by the Node, so it goes with it) if there is none.
func (m *nodeInfoManager) updateCSINode(ctx context.Context, node *v1.Node, change func([]storagev1.CSINodeDriver) []storagev1.CSINodeDriver) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cn, err := m.csiNodes.Get(ctx, m.nodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cn = &storagev1.CSINode{
				ObjectMeta: metav1.ObjectMeta{Name: m.nodeName, OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}},
				Spec: storagev1.CSINodeSpec{Drivers: change(nil)},
			}
			_, err = m.csiNodes.Create(ctx, cn, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return fmt.Errorf("get CSINode %s: %w", m.nodeName, err)
		}
		cn.Spec.Drivers = change(cn.Spec.Drivers)
		_, err = m.csiNodes.Update(ctx, cn, metav1.UpdateOptions{})
		return err
	})
}

func withoutDriver(drivers []storagev1.CSINodeDriver, name string) []storagev1.CSINodeDriver {
	return slices.DeleteFunc(slices.Clone(drivers), func(d storagev1.CSINodeDriver) bool { return d.Name == name })
}
