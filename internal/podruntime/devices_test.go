package podruntime

import (
	"context"
	"errors"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

type fakeDevices struct {
	opts *runtimeapi.ContainerConfig
	err  error
}

func (f fakeDevices) RunOptions(context.Context, *v1.Pod, *v1.Container) (*runtimeapi.ContainerConfig, error) {
	return f.opts, f.err
}

// What device plugins allocated reaches the container's CRI config, in
// upstream's order: their envs first (the container's own win a clash),
// their mounts before the volumes', devices, CDI devices, and their
// annotations under Skiff's.
func TestContainerConfigCarriesDevices(t *testing.T) {
	f := newFixture(t, v1.RestartPolicyAlways)
	f.m.cfg.Devices = fakeDevices{opts: &runtimeapi.ContainerConfig{
		Envs:        []*runtimeapi.KeyValue{{Key: "DEV", Value: "Dev-1"}, {Key: "GREETING", Value: "from-plugin"}},
		Mounts:      []*runtimeapi.Mount{{ContainerPath: "/tmp/Dev-1", HostPath: "/tmp/Dev-1"}},
		Devices:     []*runtimeapi.Device{{ContainerPath: "/dev/x", HostPath: "/dev/null", Permissions: "rw"}},
		CDIDevices:  []*runtimeapi.CDIDevice{{Name: "example.com/resource=Dev-1"}},
		Annotations: map[string]string{"example.com/a": "1", "io.kubernetes.container.restartCount": "99"},
	}}
	c := &f.pod.Spec.Containers[0]
	cfg, cerr := f.m.containerConfig(context.Background(), f.pod, c, 0, "x", nil, nil)
	if cerr != nil {
		t.Fatal(cerr)
	}
	if len(cfg.Envs) < 2 || cfg.Envs[0].Key != "DEV" || cfg.Envs[len(cfg.Envs)-1].Key != "GREETING" || cfg.Envs[len(cfg.Envs)-1].Value != "hi" {
		t.Errorf("envs = %v: want the plugin's first and the container's GREETING last", cfg.Envs)
	}
	if len(cfg.Mounts) == 0 || cfg.Mounts[0].ContainerPath != "/tmp/Dev-1" {
		t.Errorf("mounts = %v: want the plugin's first", cfg.Mounts)
	}
	if !reflect.DeepEqual(cfg.Devices, []*runtimeapi.Device{{ContainerPath: "/dev/x", HostPath: "/dev/null", Permissions: "rw"}}) ||
		!reflect.DeepEqual(cfg.CDIDevices, []*runtimeapi.CDIDevice{{Name: "example.com/resource=Dev-1"}}) {
		t.Errorf("devices %v, CDI devices %v", cfg.Devices, cfg.CDIDevices)
	}
	if cfg.Annotations["example.com/a"] != "1" || cfg.Annotations["io.kubernetes.container.restartCount"] != "0" {
		t.Errorf("annotations = %v: want the plugin's, under Skiff's own", cfg.Annotations)
	}
	f.m.cfg.Devices = fakeDevices{err: errors.New("device plugin example.com/resource: PreStartContainer: boom")}
	if _, cerr := f.m.containerConfig(context.Background(), f.pod, c, 0, "x", nil, nil); cerr == nil || cerr.Reason != ReasonCreateContainerConfig {
		t.Errorf("a device error must fail the container's config visibly, got %v", cerr)
	}
}
