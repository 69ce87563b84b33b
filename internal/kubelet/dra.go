package kubelet

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcev1 "k8s.io/client-go/kubernetes/typed/resource/v1"
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

// newDRA makes the DRA driver registry and the claim manager, which
// reads claims from the apiserver when there is one.
func (k *Kubelet) newDRA(client kube.Interface) (*dra.Drivers, *dra.Manager, error) {
	fg, err := config.FeatureGate(k.cfg.Kubelet.FeatureGates)
	if err != nil {
		return nil, nil, err
	}
	disabled := !fg.Enabled("DynamicResourceAllocation")
	if disabled {
		klog.InfoS("Warning: the DynamicResourceAllocation feature gate is off: DRA drivers are refused and ResourceClaims are not prepared")
	}
	drivers := dra.NewDrivers(dra.DriversConfig{Metrics: &k.cfg.Metrics.DRA, Disabled: disabled})
	dc := dra.Config{Dir: k.cfg.RootDir, Drivers: drivers, Metrics: &k.cfg.Metrics.DRA, Disabled: disabled}
	if client != nil {
		dc.Claims = claimGetter{client.ResourceV1()}
	}
	m, err := dra.New(dc)
	if err != nil {
		return nil, nil, err
	}
	return drivers, m, nil
}

// claimGetter reads ResourceClaims through the apiserver.
type claimGetter struct {
	c resourcev1.ResourceV1Interface
}

func (g claimGetter) Get(ctx context.Context, namespace, name string) (*resourceapi.ResourceClaim, error) {
	return g.c.ResourceClaims(namespace).Get(ctx, name, metav1.GetOptions{})
}

// runDRA unprepares, every period, the claims of pods no longer active.
func (k *Kubelet) runDRA(ctx context.Context) {
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
