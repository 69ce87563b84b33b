package devicemanager

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// watch keeps p's ListAndWatch stream open: an ended stream is opened
// again after a back-off while the plugin's socket is there, up to
// maxReopens failures in a row; then, or when the socket is gone, the
// plugin is stopped.
func (m *Manager) watch(ctx context.Context, p *plugin) {
	defer m.wg.Done()
	defer m.stop(p)
	failures := 0
	for {
		got, err := m.listAndWatch(ctx, p)
		if ctx.Err() != nil {
			return
		}
		if got {
			failures = 0
		}
		failures++
		if failures > m.maxReopens || !socketPresent(m.cfg.Dir, p.endpoint) {
			klog.ErrorS(err, "Device plugin is gone; its devices are unhealthy until it registers again",
				"resource", p.resource, "endpoint", p.endpoint)
			return
		}
		wait := m.reopenBackoff << (failures - 1)
		klog.InfoS("Device plugin's ListAndWatch ended; opening it again", "resource", p.resource, "err", err, "after", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// listAndWatch reads one ListAndWatch stream to its end; got says
// whether any valid device list came.
func (m *Manager) listAndWatch(ctx context.Context, p *plugin) (got bool, err error) {
	stream, err := p.api.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		return false, fmt.Errorf("open ListAndWatch: %w", err)
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			return got, fmt.Errorf("ListAndWatch: %w", err)
		}
		if err := validateDevices(resp.Devices); err != nil {
			klog.ErrorS(err, "Ignored a device list from a device plugin; its devices stay as they were",
				"resource", p.resource, "endpoint", p.endpoint)
			continue
		}
		got = true
		m.update(p, resp.Devices)
	}
}

// validateDevices refuses a device list no hardware gives: too long,
// IDs empty or repeated, a health that is neither Healthy nor Unhealthy.
func validateDevices(devs []*pluginapi.Device) error {
	if len(devs) > maxDevices {
		return fmt.Errorf("%d devices, more than the %d Skiff accepts from one plugin", len(devs), maxDevices)
	}
	seen := make(map[string]bool, len(devs))
	for _, d := range devs {
		switch {
		case d == nil || d.ID == "":
			return fmt.Errorf("a device with no ID")
		case seen[d.ID]:
			return fmt.Errorf("device %q listed twice", d.ID)
		case d.Health != pluginapi.Healthy && d.Health != pluginapi.Unhealthy:
			return fmt.Errorf("device %q has health %q, want %q or %q", d.ID, d.Health, pluginapi.Healthy, pluginapi.Unhealthy)
		}
		seen[d.ID] = true
	}
	return nil
}

// update takes p's new device list, if p is still its resource's plugin.
func (m *Manager) update(p *plugin, devs []*pluginapi.Device) {
	m.mu.Lock()
	if m.plugins[p.resource] != p {
		m.mu.Unlock()
		return
	}
	byID := make(map[string]*pluginapi.Device, len(devs))
	for _, d := range devs {
		byID[d.ID] = d
	}
	m.devices[p.resource] = byID
	healthy := len(m.healthyLocked(p.resource))
	m.writeCheckpoint()
	m.mu.Unlock()
	klog.V(2).InfoS("Device plugin's devices", "resource", p.resource, "devices", len(devs), "healthy", healthy)
}

// stop marks p stopped, if it is still its resource's plugin: its devices
// are no longer allocatable and the grace period starts.
func (m *Manager) stop(p *plugin) {
	p.conn.Close()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.plugins[p.resource] == p {
		p.stopped = m.clock.Now()
		m.writeCheckpoint()
	}
}

// healthyLocked are the sorted IDs of res's healthy devices; none while
// its plugin is stopped. Called with mu held.
func (m *Manager) healthyLocked(res string) []string {
	p := m.plugins[res]
	if p == nil || !p.connected() {
		return []string{}
	}
	out := []string{}
	for id, d := range m.devices[res] {
		if d.Health == pluginapi.Healthy {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// Capacity is what the Node advertises of the plugins' resources: every
// device in capacity, the healthy ones of connected plugins in
// allocatable. A resource whose plugin has been stopped past the grace
// period is dropped and returned once in removed, for the Node to set to
// zero.
func (m *Manager) Capacity() (capacity, allocatable v1.ResourceList, removed []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	capacity, allocatable = v1.ResourceList{}, v1.ResourceList{}
	now := m.clock.Now()
	dropped := false
	for _, res := range slices.Sorted(maps.Keys(m.plugins)) {
		p := m.plugins[res]
		if !p.stopped.IsZero() && now.Sub(p.stopped) > gracePeriod {
			klog.InfoS("Device plugin gone past its grace period; removing its resource", "resource", res, "stopped", p.stopped)
			delete(m.plugins, res)
			delete(m.devices, res)
			m.removed = append(m.removed, res)
			dropped = true
			continue
		}
		capacity[v1.ResourceName(res)] = *resource.NewQuantity(int64(len(m.devices[res])), resource.DecimalSI)
		allocatable[v1.ResourceName(res)] = *resource.NewQuantity(int64(len(m.healthyLocked(res))), resource.DecimalSI)
	}
	if dropped {
		m.writeCheckpoint()
	}
	removed, m.removed = m.removed, nil
	return capacity, allocatable, removed
}
