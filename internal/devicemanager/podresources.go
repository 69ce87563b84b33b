package devicemanager

import (
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// ContainerDevices are a container's devices as the pod resources API
// reports them: one entry per device and NUMA node, as upstream.
func (m *Manager) ContainerDevices(uid types.UID, container string) []*podresourcesv1.ContainerDevices {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*podresourcesv1.ContainerDevices
	resources := m.alloc[uid][container]
	for _, res := range slices.Sorted(maps.Keys(resources)) {
		d := resources[res]
		for _, node := range slices.Sorted(maps.Keys(d.ids)) {
			for _, id := range d.ids[node] {
				out = append(out, containerDevice(res, id, node))
			}
		}
	}
	return out
}

// AllocatableDevices are the healthy devices of the connected plugins,
// each with the NUMA nodes its plugin reported.
func (m *Manager) AllocatableDevices() []*podresourcesv1.ContainerDevices {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*podresourcesv1.ContainerDevices
	for _, res := range slices.Sorted(maps.Keys(m.plugins)) {
		for _, id := range m.healthyLocked(res) {
			d := m.devices[res][id]
			if d.Topology == nil || len(d.Topology.Nodes) == 0 {
				out = append(out, containerDevice(res, id, noTopology))
				continue
			}
			for _, n := range d.Topology.Nodes {
				out = append(out, containerDevice(res, id, n.ID))
			}
		}
	}
	return out
}

func containerDevice(res, id string, node int64) *podresourcesv1.ContainerDevices {
	cd := &podresourcesv1.ContainerDevices{ResourceName: res, DeviceIds: []string{id}}
	if node != noTopology {
		cd.Topology = &podresourcesv1.TopologyInfo{Nodes: []*podresourcesv1.NUMANode{{ID: node}}}
	}
	return cd
}
