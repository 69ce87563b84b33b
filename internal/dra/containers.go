package dra

import (
	"fmt"
	"slices"
	"sort"

	v1 "k8s.io/api/core/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// containerClaims calls f with the cached claim behind each claim the
// container references (containers[].resources.claims) and the request
// it names ("" for all); a claim not cached is an error.
func (m *Manager) containerClaims(pod *v1.Pod, c *v1.Container, f func(info *claimInfo, request string)) error {
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		name, ok, _, err := claimName(pod, pc)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		for _, rc := range c.Resources.Claims {
			if rc.Name != pc.Name {
				continue
			}
			m.mu.Lock()
			info := m.claims[pod.Namespace+"/"+name]
			if info != nil {
				f(info, rc.Request)
			}
			m.mu.Unlock()
			if info == nil {
				return fmt.Errorf("ResourceClaim %s of container %s is not prepared", name, c.Name)
			}
		}
	}
	return nil
}

// CDIDevices are the CDI device IDs of the devices prepared for the
// claims (and requests) the container references, for CRI.
func (m *Manager) CDIDevices(pod *v1.Pod, c *v1.Container) ([]string, error) {
	if m.cfg.Disabled {
		return nil, nil
	}
	var out []string
	err := m.containerClaims(pod, c, func(info *claimInfo, request string) {
		for _, drv := range sortedDrivers(info) {
			for _, d := range info.DriverState[drv].Devices {
				if request == "" || len(d.RequestNames) == 0 || slices.Contains(d.RequestNames, request) {
					out = append(out, d.CDIDeviceIDs...)
				}
			}
		}
	})
	return out, err
}

// DynamicResources reports the claims the container references, as the
// pod resources API's dynamic resources: each driver's devices with
// their CDI devices.
func (m *Manager) DynamicResources(pod *v1.Pod, container string) []*podresourcesv1.DynamicResource {
	var c *v1.Container
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == container {
			c = &pod.Spec.InitContainers[i]
		}
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == container {
			c = &pod.Spec.Containers[i]
		}
	}
	if c == nil {
		return nil
	}
	var out []*podresourcesv1.DynamicResource
	_ = m.containerClaims(pod, c, func(info *claimInfo, _ string) {
		dr := &podresourcesv1.DynamicResource{ClaimName: info.ClaimName, ClaimNamespace: info.Namespace}
		for _, drv := range sortedDrivers(info) {
			for _, d := range info.DriverState[drv].Devices {
				cr := &podresourcesv1.ClaimResource{DriverName: drv, PoolName: d.PoolName, DeviceName: d.DeviceName}
				for _, id := range d.CDIDeviceIDs {
					cr.CdiDevices = append(cr.CdiDevices, &podresourcesv1.CDIDevice{Name: id})
				}
				dr.ClaimResources = append(dr.ClaimResources, cr)
			}
		}
		out = append(out, dr)
	})
	return out
}

func sortedDrivers(info *claimInfo) []string {
	names := make([]string, 0, len(info.DriverState))
	for n := range info.DriverState {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
