package kubelet

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcev1 "k8s.io/client-go/kubernetes/typed/resource/v1"
	"k8s.io/component-base/featuregate"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/config"
	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/devicemanager"
	"github.com/skiff-sh/skiff/internal/dra"
	"github.com/skiff-sh/skiff/internal/kube"
	"github.com/skiff-sh/skiff/internal/podruntime"
)

// draReconcilePeriod is how often the claims of pods that went unnoticed
// (while Skiff was down, say) are unprepared, as upstream's.
const draReconcilePeriod = 60 * time.Second

// newDeviceManagers makes the device plugin manager and the DRA claim
// manager, and returns the DRA drivers' registry for the plugin watcher.
func (k *Kubelet) newDeviceManagers(client kube.Interface) (*dra.Drivers, error) {
	var err error
	if k.devices, err = k.newDevices(); err != nil {
		return nil, err
	}
	drivers, m, err := k.newDRA(client)
	if err != nil {
		return nil, err
	}
	k.dra = m
	return drivers, nil
}

// draUnimplementedGates are the DRA feature gates, alpha and off by
// default in upstream 1.34, whose features Skiff does not implement.
var draUnimplementedGates = []string{
	"ResourceHealthStatus", // devices' health from the drivers' DRAResourceHealth stream
	"DRAExtendedResource",  // extended resources backed by DRA devices
}

// newDRA makes the DRA driver registry and the claim manager, which
// reads claims from the apiserver when there is one; with one, a wiper
// removes the slices of drivers gone from the node.
func (k *Kubelet) newDRA(client kube.Interface) (*dra.Drivers, *dra.Manager, error) {
	fg, err := config.FeatureGate(k.cfg.Kubelet.FeatureGates)
	if err != nil {
		return nil, nil, err
	}
	disabled := !fg.Enabled("DynamicResourceAllocation")
	if disabled {
		klog.InfoS("Warning: the DynamicResourceAllocation feature gate is off: DRA drivers are refused and ResourceClaims are not prepared")
	}
	if on := draGatesWithoutEffect(fg); len(on) > 0 {
		klog.InfoS("Warning: Skiff does not implement these DRA features; their feature gates have no effect", "gates", on)
	}
	dcfg := dra.DriversConfig{Metrics: &k.cfg.Metrics.DRA, Disabled: disabled,
		// Pods that waited for a driver need not wait out their back-off.
		Registered: k.retryPodsOfDriver}
	dc := dra.Config{Dir: k.cfg.RootDir, Metrics: &k.cfg.Metrics.DRA, Disabled: disabled}
	if client != nil {
		dc.Claims = claimGetter{client.ResourceV1()}
		if !disabled {
			k.draWiper = dra.NewWiper(dra.WiperConfig{Slices: client.ResourceV1().ResourceSlices(),
				NodeName: k.cfg.NodeName, Clock: k.clock})
			dcfg.Available = k.draWiper.Available
		}
	}
	dc.Drivers = dra.NewDrivers(dcfg)
	m, err := dra.New(dc)
	if err != nil {
		return nil, nil, err
	}
	return dc.Drivers, m, nil
}

// draGatesWithoutEffect are the gates of draUnimplementedGates turned on.
func draGatesWithoutEffect(fg featuregate.FeatureGate) []string {
	var on []string
	for _, g := range draUnimplementedGates {
		if fg.Enabled(featuregate.Feature(g)) {
			on = append(on, g)
		}
	}
	return on
}

// retryPodsOfDriver syncs at once the pods whose claims wait for the
// driver that just registered.
func (k *Kubelet) retryPodsOfDriver(driver string) {
	for _, uid := range k.dra.WaitingFor(driver) {
		k.workers.Notify(uid)
	}
}

// claimGetter reads ResourceClaims through the apiserver.
type claimGetter struct {
	c resourcev1.ResourceV1Interface
}

func (g claimGetter) Get(ctx context.Context, namespace, name string) (*resourceapi.ResourceClaim, error) {
	return g.c.ResourceClaims(namespace).Get(ctx, name, metav1.GetOptions{})
}

// runDRA unprepares, every period, the claims of pods no longer active,
// and wipes the slices of drivers gone.
func (k *Kubelet) runDRA(ctx context.Context) {
	if k.draWiper != nil {
		var wg sync.WaitGroup
		defer wg.Wait()
		wg.Add(1)
		go func() { defer wg.Done(); k.draWiper.Run(ctx) }()
	}
	t := k.clock.NewTicker(draReconcilePeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			active, complete := k.deviceHolders()
			k.dra.Reconcile(ctx, active, complete)
		}
	}
}

// draHook prepares a pod's ResourceClaims before it runs and unprepares
// them once nothing of it runs. A pod whose claims cannot be prepared
// waits, with an event saying why, and is retried with back-off.
type draHook struct {
	dra      *dra.Manager
	recorder podruntime.Recorder
}

func (draHook) Name() string { return "dynamic resources" }

func (h draHook) Prestart(ctx context.Context, pod *v1.Pod, _ *podRun) error {
	if err := h.dra.Prepare(ctx, pod); err != nil {
		if ctx.Err() != nil {
			return err // the pod must stop: no failure to report
		}
		h.recorder.Eventf(pod, v1.EventTypeWarning, "FailedPrepareDynamicResources", "Failed to prepare dynamic resources: %v", err)
		return err
	}
	return nil
}

func (h draHook) Teardown(ctx context.Context, ref container.PodRef) error {
	return h.dra.Unprepare(ctx, ref.UID)
}

// containerDevices gives a container what device plugins allocated it
// and the CDI devices of the ResourceClaims it references.
type containerDevices struct {
	plugins *devicemanager.Manager
	dra     *dra.Manager
}

func (d containerDevices) RunOptions(ctx context.Context, pod *v1.Pod, c *v1.Container) (*runtimeapi.ContainerConfig, error) {
	cfg, err := d.plugins.RunOptions(ctx, pod, c)
	if err != nil || len(c.Resources.Claims) == 0 {
		return cfg, err
	}
	ids, err := d.dra.CDIDevices(pod, c)
	if err != nil {
		return nil, fmt.Errorf("dynamic resources: %w", err)
	}
	if len(ids) == 0 {
		return cfg, nil
	}
	if cfg == nil {
		cfg = &runtimeapi.ContainerConfig{}
	}
	for _, id := range ids {
		cfg.CDIDevices = append(cfg.CDIDevices, &runtimeapi.CDIDevice{Name: id})
	}
	return cfg, nil
}
