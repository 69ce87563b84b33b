package podruntime

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"path/filepath"
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/cri"
	"github.com/skiff-sh/skiff/internal/expansion"
	"github.com/skiff-sh/skiff/internal/volume"
)

// HashContainer hashes the container fields whose change needs a new
// container. As upstream, only name and image: the rest of a pod's container
// spec is immutable in the API, and static pods get a new UID on any change.
func HashContainer(c *v1.Container) uint64 {
	b, _ := json.Marshal(struct{ Name, Image string }{c.Name, c.Image})
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// ContainerLogPath is a container's log file relative to the pod log
// directory: <name>/<restartCount>.log, as upstream.
func ContainerLogPath(name string, restartCount int) string {
	return filepath.Join(name, strconv.Itoa(restartCount)+".log")
}

// containerConfig builds the CRI config of one container attempt.
func (m *Manager) containerConfig(ctx context.Context, pod *v1.Pod, c *v1.Container, restartCount int, imageRef string, podIPs []string, volumes map[string]volume.Mounted) (*runtimeapi.ContainerConfig, *ContainerError) {
	env, err := m.cfg.Env.Env(ctx, pod, c, podIPs)
	if err != nil {
		return nil, &ContainerError{ReasonCreateContainerConfig, err.Error()}
	}
	// Command, args and subPathExpr see the final environment, service
	// variables included, as upstream.
	envs := make([]*runtimeapi.KeyValue, len(env))
	vars := make(map[string]string, len(env))
	for i, e := range env {
		envs[i] = &runtimeapi.KeyValue{Key: e.Name, Value: e.Value}
		vars[e.Name] = e.Value
	}
	lookup := expansion.MapLookup(vars)
	expand := func(in []string) []string {
		if in == nil {
			return nil
		}
		out := make([]string, len(in))
		for i, s := range in {
			out[i] = expansion.Expand(s, lookup)
		}
		return out
	}
	podDir := ""
	if m.cfg.PodDir != nil {
		podDir = m.cfg.PodDir(pod.UID)
	}
	mounts, err := containerMounts(c, podDir, volumes, lookup)
	if err != nil {
		return nil, &ContainerError{ReasonCreateContainerConfig, err.Error()}
	}
	if m.cfg.PodDir != nil {
		hosts, err := m.writeHostsFile(pod, podIPs)
		if err != nil {
			return nil, &ContainerError{ReasonCreateContainerConfig, err.Error()}
		}
		if hm := hostsMount(c, hosts); hm != nil {
			mounts = append(mounts, hm)
		}
	}
	if tm := m.terminationMessageMount(pod, c); tm != nil {
		mounts = append(mounts, tm)
	}
	cfg := &runtimeapi.ContainerConfig{
		Mounts:      mounts,
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: uint32(restartCount)},
		Image:       &runtimeapi.ImageSpec{Image: imageRef, UserSpecifiedImage: c.Image},
		Command:     expand(c.Command),
		Args:        expand(c.Args),
		WorkingDir:  c.WorkingDir,
		Envs:        envs,
		Labels:      cri.ContainerLabels(pod, c.Name),
		Annotations: cri.ContainerAnnotations(pod, c, HashContainer(c), restartCount),
		LogPath:     ContainerLogPath(c.Name, restartCount),
		Stdin:       c.Stdin,
		StdinOnce:   c.StdinOnce,
		Tty:         c.TTY,
		Linux: &runtimeapi.LinuxContainerConfig{
			SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				NamespaceOptions: namespaceOptions(pod),
			},
		},
	}
	if m.cfg.Devices != nil {
		devices, err := m.cfg.Devices.RunOptions(ctx, pod, c)
		if err != nil {
			return nil, &ContainerError{ReasonCreateContainerConfig, err.Error()}
		}
		withDevices(cfg, devices)
	}
	// After the device plugins' devices, as upstream.
	blocks, err := blockDevices(c, volumes)
	if err != nil {
		return nil, &ContainerError{ReasonCreateContainerConfig, err.Error()}
	}
	cfg.Devices = append(cfg.Devices, blocks...)
	return cfg, nil
}

// withDevices adds what device plugins allocated the container, as
// upstream orders it: their envs before the container's own (which win
// a clash), their mounts before the volumes', their annotations under
// the kubelet's.
func withDevices(cfg, d *runtimeapi.ContainerConfig) {
	if d == nil {
		return
	}
	cfg.Envs = append(slices.Clone(d.Envs), cfg.Envs...)
	cfg.Mounts = append(slices.Clone(d.Mounts), cfg.Mounts...)
	cfg.Devices = append(cfg.Devices, d.Devices...)
	cfg.CDIDevices = append(cfg.CDIDevices, d.CDIDevices...)
	for k, v := range d.Annotations {
		if _, ok := cfg.Annotations[k]; !ok {
			cfg.Annotations[k] = v
		}
	}
}
