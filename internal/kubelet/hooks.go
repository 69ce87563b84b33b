package kubelet

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/volume"
)

// A podHook is one per-pod subsystem. The kubelet keeps an ordered list of
// them, which reads as a pod's lifecycle; each implements the steps it
// needs of prepareHook, prestartHook and teardownHook. Every step runs
// again on later syncs and after a restart, so each must be idempotent.
type podHook interface {
	Name() string
}

// prepareHook runs on every sync of a pod, before its status is computed:
// a terminal pod too.
type prepareHook interface {
	podHook
	Prepare(ctx context.Context, pod *v1.Pod) error
}

// prestartHook runs on every sync of a pod that is to run, before the
// runtime syncs it; it may add to what the runtime gets.
type prestartHook interface {
	podHook
	Prestart(ctx context.Context, pod *v1.Pod, run *podRun) error
}

// teardownHook runs once no container of the pod is left and no source
// wants it, in the reverse order of the list. An error is retried.
type teardownHook interface {
	podHook
	Teardown(ctx context.Context, ref container.PodRef) error
}

// podRun is what the prestart hooks give the runtime.
type podRun struct {
	volumes map[string]volume.Mounted
}

// podHooks is the per-pod lifecycle, in order.
func (k *Kubelet) podHooks() []podHook {
	return []podHook{
		startupHook{k.startup},
		proberHook{k.prober},
		mirrorPodHook{k.cluster},
		volumesHook{volumes: k.volumeManager, startup: k.startup, recorder: k.recorder, clock: k.clock},
		draHook{dra: k.dra, recorder: k.recorder},
		cgroupsHook{k.cgroups},
		devicesHook{k.devices},
	}
}

// prepare runs the prepare hooks in order, stopping at the first error.
func (k *Kubelet) prepare(ctx context.Context, pod *v1.Pod) error {
	for _, h := range k.hooks {
		if p, ok := h.(prepareHook); ok {
			if err := p.Prepare(ctx, pod); err != nil {
				return fmt.Errorf("%s: %w", h.Name(), err)
			}
		}
	}
	return nil
}

// prestart runs the prestart hooks in order, stopping at the first error.
func (k *Kubelet) prestart(ctx context.Context, pod *v1.Pod) (*podRun, error) {
	run := &podRun{}
	for _, h := range k.hooks {
		if p, ok := h.(prestartHook); ok {
			if err := p.Prestart(ctx, pod, run); err != nil {
				return nil, fmt.Errorf("%s: %w", h.Name(), err)
			}
		}
	}
	return run, nil
}

// teardownPod forgets a pod: its hooks in reverse order, then its status
// and its record. It is the one place a pod is forgotten, called once the
// runtime holds nothing of it (or never did) and no source wants it. Every
// hook runs even if one fails; the joined error asks for a retry.
func (k *Kubelet) teardownPod(ctx context.Context, ref container.PodRef) error {
	var errs []error
	for i := len(k.hooks) - 1; i >= 0; i-- {
		if t, ok := k.hooks[i].(teardownHook); ok {
			if err := t.Teardown(ctx, ref); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", k.hooks[i].Name(), err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	k.statuses.RemovePod(ref.UID)
	k.records.drop(ref.UID)
	k.resize.Forget(ref.UID)
	return nil
}

func refOf(p *v1.Pod) container.PodRef {
	return container.PodRef{UID: p.UID, Name: p.Name, Namespace: p.Namespace}
}
