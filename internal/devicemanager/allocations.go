package devicemanager

import (
	"maps"
	"slices"
	"sort"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/skiff-sh/skiff/internal/devicemanager/checkpoint"
)

// noTopology is the NUMA node of devices that report none (upstream's
// nodeWithoutTopology).
const noTopology = -1

// assigned is one container's devices of one resource and what the
// plugin's Allocate answered for them.
type assigned struct {
	ids  checkpoint.DevicesPerNUMA
	resp *pluginapi.ContainerAllocateResponse
}

// allocations are the devices given out: by pod, container, resource.
type allocations map[types.UID]map[string]map[string]*assigned

func (a allocations) get(uid types.UID, container, res string) *assigned {
	return a[uid][container][res]
}

func (a allocations) set(uid types.UID, container, res string, d *assigned) {
	if a[uid] == nil {
		a[uid] = map[string]map[string]*assigned{}
	}
	if a[uid][container] == nil {
		a[uid][container] = map[string]*assigned{}
	}
	a[uid][container][res] = d
}

// dropPod forgets a pod; false if it had nothing.
func (a allocations) dropPod(uid types.UID) bool {
	_, ok := a[uid]
	delete(a, uid)
	return ok
}

func (a allocations) pods() []types.UID { return slices.Collect(maps.Keys(a)) }

// inUse are the devices of res given to any container.
func (a allocations) inUse(res string) map[string]bool {
	out := map[string]bool{}
	for _, containers := range a {
		for _, resources := range containers {
			if d := resources[res]; d != nil {
				for _, id := range ids(d.ids) {
					out[id] = true
				}
			}
		}
	}
	return out
}

// hasResource reports whether any container holds devices of res.
func (a allocations) hasResource(res string) bool { return len(a.inUse(res)) > 0 }

// ids flattens devices by NUMA node into sorted, distinct IDs.
func ids(d checkpoint.DevicesPerNUMA) []string {
	set := map[string]bool{}
	for _, l := range d {
		for _, id := range l {
			set[id] = true
		}
	}
	out := slices.Collect(maps.Keys(set))
	sort.Strings(out)
	return out
}

func (a allocations) toCheckpoint() []checkpoint.PodDevicesEntry {
	var out []checkpoint.PodDevicesEntry
	for uid, containers := range a {
		for name, resources := range containers {
			for res, d := range resources {
				b, err := proto.Marshal(d.resp)
				if err != nil {
					klog.ErrorS(err, "Cannot encode an Allocate answer for the checkpoint", "podUID", uid, "container", name, "resource", res)
					continue
				}
				out = append(out, checkpoint.PodDevicesEntry{PodUID: string(uid), ContainerName: name, ResourceName: res, DeviceIDs: d.ids, AllocResp: b})
			}
		}
	}
	return out
}

func (a allocations) fromCheckpoint(entries []checkpoint.PodDevicesEntry) {
	for _, e := range entries {
		resp := &pluginapi.ContainerAllocateResponse{}
		if err := proto.Unmarshal(e.AllocResp, resp); err != nil {
			klog.ErrorS(err, "Cannot decode an Allocate answer in the checkpoint; skipping it", "podUID", e.PodUID, "container", e.ContainerName, "resource", e.ResourceName)
			continue
		}
		a.set(types.UID(e.PodUID), e.ContainerName, e.ResourceName, &assigned{ids: e.DeviceIDs, resp: resp})
	}
}

// runOptions merges what the plugins answered for a container into the
// parts of a CRI container config they fill, as upstream: resources in
// name order, the first setting of an env, mount, device path or
// annotation wins, CDI devices once each. Nil when the container has
// no devices.
func (a allocations) runOptions(uid types.UID, container string) *runtimeapi.ContainerConfig {
	resources := a[uid][container]
	if len(resources) == 0 {
		return nil
	}
	out := &runtimeapi.ContainerConfig{Annotations: map[string]string{}}
	envs, mounts, devs, cdi := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, res := range slices.Sorted(maps.Keys(resources)) {
		resp := resources[res].resp
		for _, k := range slices.Sorted(maps.Keys(resp.Envs)) {
			if !envs[k] {
				envs[k] = true
				out.Envs = append(out.Envs, &runtimeapi.KeyValue{Key: k, Value: resp.Envs[k]})
			}
		}
		for _, mnt := range resp.Mounts {
			if !mounts[mnt.ContainerPath] {
				mounts[mnt.ContainerPath] = true
				out.Mounts = append(out.Mounts, &runtimeapi.Mount{ContainerPath: mnt.ContainerPath, HostPath: mnt.HostPath, Readonly: mnt.ReadOnly})
			}
		}
		for _, d := range resp.Devices {
			if !devs[d.ContainerPath] {
				devs[d.ContainerPath] = true
				out.Devices = append(out.Devices, &runtimeapi.Device{ContainerPath: d.ContainerPath, HostPath: d.HostPath, Permissions: d.Permissions})
			}
		}
		for k, v := range resp.Annotations {
			if _, ok := out.Annotations[k]; !ok {
				out.Annotations[k] = v
			}
		}
		for _, c := range resp.CdiDevices {
			if !cdi[c.Name] {
				cdi[c.Name] = true
				out.CDIDevices = append(out.CDIDevices, &runtimeapi.CDIDevice{Name: c.Name})
			}
		}
	}
	return out
}
