package kubelet

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/admission"
	"github.com/skiff-sh/skiff/internal/config"
	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/devicemanager"
	"github.com/skiff-sh/skiff/internal/podresources"
	"github.com/skiff-sh/skiff/internal/podstatus"
	"github.com/skiff-sh/skiff/internal/podworker"
)

// newDevices makes the device manager on the configured directory
// (upstream's fixed one unless --device-plugin-dir says otherwise).
func (k *Kubelet) newDevices() (*devicemanager.Manager, error) {
	return devicemanager.New(devicemanager.Config{
		Dir: k.cfg.DevicePluginDir, Active: k.deviceHolders, Clock: k.clock,
	})
}

// deviceHolders are the pods that may keep their devices: every wanted
// pod not finished, rejected or terminated (a terminating pod's
// containers may still use them). Incomplete until every pod source has
// been heard from.
func (k *Kubelet) deviceHolders() (map[types.UID]bool, bool) {
	if !k.pods.ready(k.sources) {
		return nil, false
	}
	out := map[types.UID]bool{}
	for _, p := range k.pods.pods() {
		if k.records.get(p.UID).verdict == rejected || podstatus.IsTerminal(p.Status.Phase) {
			continue
		}
		if s, ok := k.statuses.Status(p.UID); ok && podstatus.IsTerminal(s.Phase) {
			continue
		}
		if phase, ok := k.workers.Phase(p.UID); ok && phase == podworker.Terminated {
			continue
		}
		out[p.UID] = true
	}
	return out, true
}

// runDevices starts the device plugin registration service and the pod
// resources API; a socket that cannot be made stops Skiff, as upstream.
func (k *Kubelet) runDevices(spawn func(func(context.Context))) error {
	l, err := k.devices.Listen()
	if err != nil {
		return err
	}
	spawn(func(ctx context.Context) { k.devices.Run(ctx, l) })
	pl, err := podresources.Listen(k.cfg.RootDir)
	if err != nil {
		return err
	}
	fg, err := config.FeatureGate(k.cfg.Kubelet.FeatureGates)
	if err != nil {
		return err
	}
	srv := podresources.New(podResourcesPods{k}, k.devices, k.dra, podresources.Gates{
		Get: fg.Enabled("KubeletPodResourcesGet"), ListActivePods: fg.Enabled("KubeletPodResourcesListUseActivePods"),
		DynamicResources: fg.Enabled("KubeletPodResourcesDynamicResources") && fg.Enabled("DynamicResourceAllocation"),
	})
	spawn(func(ctx context.Context) { srv.Serve(ctx, pl) })
	return nil
}

// admitDevices gives the pod its devices; a pod that cannot have them is
// refused as upstream refuses it.
func (k *Kubelet) admitDevices(ctx context.Context, p *v1.Pod) admission.Result {
	if err := k.devices.Allocate(ctx, p); err != nil {
		return admission.Result{Reason: "UnexpectedAdmissionError",
			Message: fmt.Sprintf("Allocate failed due to %v, which is unexpected", err)}
	}
	return admission.Result{Admit: true}
}

// devicesHook releases a pod's devices once nothing of it runs.
type devicesHook struct{ devices *devicemanager.Manager }

func (devicesHook) Name() string { return "devices" }

func (h devicesHook) Teardown(_ context.Context, ref container.PodRef) error {
	h.devices.Release(ref.UID)
	klog.V(4).InfoS("Released the pod's devices", "pod", klog.KRef(ref.Namespace, ref.Name))
	return nil
}

// podResourcesPods is what the pod resources API reports on.
type podResourcesPods struct{ k *Kubelet }

func (p podResourcesPods) ActivePods() []*v1.Pod { return p.k.activePods() }
func (p podResourcesPods) AllPods() []*v1.Pod    { return p.k.pods.pods() }
func (p podResourcesPods) PodByName(namespace, name string) (*v1.Pod, bool) {
	return p.k.pods.byFullName(namespace + "/" + name)
}
