package kubelet

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/kube"
	"github.com/skiff-sh/skiff/internal/podruntime"
	"github.com/skiff-sh/skiff/internal/podstartup"
	"github.com/skiff-sh/skiff/internal/volume"
	"github.com/skiff-sh/skiff/internal/volume/payload"
	"github.com/skiff-sh/skiff/internal/volumemanager"
)

// volumesHook waits for a pod's volumes before it runs and removes them
// (and the pod's directory) once it is gone.
type volumesHook struct {
	volumes  *volumemanager.Manager
	startup  *podstartup.Tracker
	recorder podruntime.Recorder
	clock    clock.PassiveClock
}

func (volumesHook) Name() string { return "volumes" }

func (h volumesHook) Prestart(ctx context.Context, pod *v1.Pod, run *podRun) error {
	began := h.clock.Now()
	vols, err := h.volumes.WaitForMount(ctx, pod)
	h.startup.Observe(pod.UID, podstartup.Volumes, "", h.clock.Since(began))
	if err != nil {
		if ctx.Err() != nil {
			return err // the pod must stop: no failure to report
		}
		h.recorder.Eventf(pod, v1.EventTypeWarning, "FailedMount", "Unable to attach or mount volumes: %v", err)
		return err
	}
	run.volumes = vols
	return nil
}

func (h volumesHook) Teardown(ctx context.Context, ref container.PodRef) error {
	return h.volumes.TearDownPod(ctx, ref.UID)
}

// newTokens is the one cache of service account tokens, for projected
// volumes and CSI drivers alike, as upstream's; nil standalone.
func newTokens(client kube.Interface) *payload.TokenManager {
	if client == nil {
		return nil
	}
	return payload.New(client.CoreV1(), nil)
}

// newVolumes makes the volume types and the volume manager over them:
// with an apiserver they read ConfigMaps, Secrets, service account
// tokens, claims and PersistentVolumes from it.
func (k *Kubelet) newVolumes(client kube.Interface, csiDrivers volume.CSI, tokens *payload.TokenManager) (*volume.Manager, *volumemanager.Manager) {
	vc := volume.Config{RootDir: k.cfg.RootDir, NodeAllocatable: k.allocatable, CSI: csiDrivers}
	if client != nil {
		vc.Client = client
		vc.Tokens = tokens
		vc.Node = k.cluster.node
	}
	vols := volume.New(vc)
	return vols, volumemanager.New(volumemanager.Config{Mounter: vols, Expander: vols, Recorder: k.recorder, Clock: k.clock})
}
