package devicemanager

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/devicemanager/checkpoint"
)

// Allocate gives the pod's containers the devices of their limits, init
// containers first: the devices of an init container that is done before
// the next one starts (not a sidecar) go to the containers after it, as
// upstream. A pod already holding its devices (admitted before a restart)
// keeps them. The error says why the pod cannot have its devices.
func (m *Manager) Allocate(ctx context.Context, pod *v1.Pod) error {
	m.allocMu.Lock()
	defer m.allocMu.Unlock()
	if !needsDevices(m, pod) {
		return nil
	}
	m.releaseInactive()
	reuse := map[string]map[string]bool{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if err := m.allocateContainer(ctx, pod, c, reuse); err != nil {
			return err
		}
		sidecar := c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
		m.adjustReuse(pod.UID, c.Name, reuse, !sidecar)
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if err := m.allocateContainer(ctx, pod, c, reuse); err != nil {
			return err
		}
		m.adjustReuse(pod.UID, c.Name, reuse, false)
	}
	return nil
}

// needsDevices reports whether any container's limits name a plugin's
// resource.
func needsDevices(m *Manager, pod *v1.Pod) bool {
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			for name, q := range cs[i].Resources.Limits {
				if !q.IsZero() && m.isDeviceResource(string(name)) {
					return true
				}
			}
		}
	}
	return false
}

// adjustReuse adds a container's devices to those the next containers may
// reuse, or takes them out.
func (m *Manager) adjustReuse(uid types.UID, container string, reuse map[string]map[string]bool, add bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for res, d := range m.alloc[uid][container] {
		if reuse[res] == nil {
			reuse[res] = map[string]bool{}
		}
		for _, id := range ids(d.ids) {
			if add {
				reuse[res][id] = true
			} else {
				delete(reuse[res], id)
			}
		}
	}
}

// isDeviceResource reports whether a plugin has registered res, or some
// container holds devices of it.
func (m *Manager) isDeviceResource(res string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.plugins[res]
	return ok || m.alloc.hasResource(res)
}

// allocateContainer gives one container the devices of its limits that
// it does not hold yet, calling each plugin's Allocate. Called with
// allocMu held.
func (m *Manager) allocateContainer(ctx context.Context, pod *v1.Pod, c *v1.Container, reuse map[string]map[string]bool) error {
	for _, name := range slices.Sorted(maps.Keys(c.Resources.Limits)) {
		res, q := string(name), c.Resources.Limits[name]
		if !m.isDeviceResource(res) || q.IsZero() {
			continue
		}
		p, devs, err := m.choose(ctx, pod.UID, c.Name, res, int(q.Value()), reuse[res])
		if err != nil || devs == nil {
			return err
		}
		klog.V(2).InfoS("Allocating devices", "pod", klog.KObj(pod), "container", c.Name, "resource", res, "devices", devs)
		resp, err := p.allocate(ctx, devs)
		if err != nil {
			return err
		}
		m.mu.Lock()
		m.alloc.set(pod.UID, c.Name, res, &assigned{ids: m.byNUMALocked(res, devs), resp: resp})
		m.writeCheckpoint()
		m.mu.Unlock()
	}
	return nil
}

// byNUMALocked groups devices by the NUMA nodes their plugin reported.
func (m *Manager) byNUMALocked(res string, devs []string) checkpoint.DevicesPerNUMA {
	out := checkpoint.DevicesPerNUMA{}
	for _, id := range devs {
		d := m.devices[res][id]
		if d == nil || d.Topology == nil || len(d.Topology.Nodes) == 0 {
			out[noTopology] = append(out[noTopology], id)
			continue
		}
		for _, n := range d.Topology.Nodes {
			out[n.ID] = append(out[n.ID], id)
		}
	}
	return out
}

// choose picks the devices of res a container needs, with upstream's
// rules and messages: none if it holds them already; else from reuse
// first, then the plugin's preferred ones among the free healthy
// devices, then any free healthy ones.
func (m *Manager) choose(ctx context.Context, uid types.UID, container, res string, needed int, reuse map[string]bool) (*plugin, []string, error) {
	m.mu.Lock()
	if have := m.alloc.get(uid, container, res); have != nil {
		m.mu.Unlock()
		if n := len(ids(have.ids)); n != needed {
			return nil, nil, fmt.Errorf("pod %s container %q changed its request for resource %q from %d to %d", uid, container, res, n, needed)
		}
		return nil, nil, nil
	}
	p := m.plugins[res]
	healthy := m.healthyLocked(res)
	inUse := m.alloc.inUse(res)
	m.mu.Unlock()
	if p == nil {
		return nil, nil, fmt.Errorf("cannot allocate unregistered device %s", res)
	}
	if len(healthy) == 0 {
		return nil, nil, fmt.Errorf("no healthy devices present; cannot allocate unhealthy devices %s", res)
	}
	var chosen []string
	for _, id := range slices.Sorted(maps.Keys(reuse)) {
		if len(chosen) < needed {
			chosen = append(chosen, id)
		}
	}
	var free []string
	for _, id := range healthy {
		if !inUse[id] && !slices.Contains(chosen, id) {
			free = append(free, id)
		}
	}
	if len(chosen)+len(free) < needed {
		return nil, nil, fmt.Errorf("requested number of devices unavailable for %s. Requested: %d, Available: %d", res, needed-len(chosen), len(free))
	}
	if len(chosen) < needed && len(chosen)+len(free) > needed && p.opts.GetGetPreferredAllocationAvailable() {
		pref, err := p.preferred(ctx, append(slices.Clone(chosen), free...), chosen, needed)
		if err != nil {
			return nil, nil, err
		}
		chosen = takeFrom(chosen, pref, free, needed)
	}
	chosen = takeFrom(chosen, free, free, needed)
	sort.Strings(chosen)
	return p, chosen, nil
}

// takeFrom adds to chosen the IDs of from that are in allowed and not yet
// chosen, until it has n. A plugin's preferred list is only advice: IDs
// it names that are not free are skipped.
func takeFrom(chosen, from, allowed []string, n int) []string {
	for _, id := range from {
		if len(chosen) >= n {
			break
		}
		if slices.Contains(allowed, id) && !slices.Contains(chosen, id) {
			chosen = append(chosen, id)
		}
	}
	return chosen
}

// RunOptions is what the container's CRI config gets of its devices
// (envs, mounts, devices, annotations, CDI devices; nil if none). A
// container that should hold devices and holds none (its assignment was
// lost) is allocated them now; PreStartContainer is called first when
// the plugin asks for it.
func (m *Manager) RunOptions(ctx context.Context, pod *v1.Pod, c *v1.Container) (*runtimeapi.ContainerConfig, error) {
	var wanted []string
	for name, q := range c.Resources.Limits {
		if !q.IsZero() && m.isDeviceResource(string(name)) {
			wanted = append(wanted, string(name))
		}
	}
	if len(wanted) == 0 {
		return nil, nil
	}
	m.allocMu.Lock()
	err := m.allocateContainer(ctx, pod, c, nil)
	m.allocMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("allocate devices: %w", err)
	}
	for _, res := range wanted {
		if err := m.preStart(ctx, pod.UID, c.Name, res); err != nil {
			return nil, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.alloc.runOptions(pod.UID, c.Name), nil
}

// preStart calls the plugin's PreStartContainer with the container's
// devices if the plugin asked for it.
func (m *Manager) preStart(ctx context.Context, uid types.UID, container, res string) error {
	m.mu.Lock()
	p, d := m.plugins[res], m.alloc.get(uid, container, res)
	connected := p != nil && p.connected()
	m.mu.Unlock()
	if p == nil || !p.opts.GetPreStartRequired() {
		return nil
	}
	if !connected {
		return fmt.Errorf("device plugin %s is not connected; cannot call PreStartContainer", res)
	}
	if d == nil {
		return fmt.Errorf("no devices of %s recorded for container %q of pod %s", res, container, uid)
	}
	return p.preStart(ctx, ids(d.ids))
}
