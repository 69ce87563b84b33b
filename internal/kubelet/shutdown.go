package kubelet

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/skiff-sh/skiff/internal/config"
	"github.com/skiff-sh/skiff/internal/podworker"
	"github.com/skiff-sh/skiff/internal/shutdown"
)

// Feature gates of graceful node shutdown, both on by default in 1.34.
const (
	gateGracefulNodeShutdown   = "GracefulNodeShutdown"
	gateShutdownByPodPriority  = "GracefulNodeShutdownBasedOnPodPriority"
	shutdownKillPollInterval   = 100 * time.Millisecond
	shutdownMinimumKillTimeout = 10 * time.Second
)

// newShutdown builds the graceful node shutdown manager from the config;
// without a shutdown grace period it does nothing.
func (k *Kubelet) newShutdown(logind func(context.Context) (shutdown.Logind, error)) (*shutdown.Manager, error) {
	kc := k.cfg.Kubelet
	fg, err := config.FeatureGate(kc.FeatureGates)
	if err != nil {
		return nil, err
	}
	var groups []shutdown.Group
	if fg.Enabled(gateGracefulNodeShutdown) {
		groups = shutdown.Groups(kc, fg.Enabled(gateShutdownByPodPriority))
	} else if fields := shutdownFields(kc); len(fields) > 0 {
		klog.InfoS("Warning: the GracefulNodeShutdown feature gate is off, so these fields have no effect", "fields", fields)
	}
	// Upstream keeps the state file and the metrics only with the gate
	// of shutdown by priority.
	statePath, times := "", func(time.Time, time.Time) {}
	if fg.Enabled(gateShutdownByPodPriority) {
		statePath, times = filepath.Join(k.cfg.RootDir, shutdown.StateFile), k.cfg.Metrics.Shutdown.Set
	}
	return shutdown.New(shutdown.Config{
		Connect: logind, StatePath: statePath, Times: times,
		Groups:      groups,
		Fields:      shutdownFields(kc),
		Pods:        k.activePods,
		Kill:        k.shutdownPod,
		NodeChanged: func() { k.cluster.syncNodeStatus() },
		Recorder:    k.recorder,
		NodeRef:     k.nodeRef(),
		Clock:       k.clock,
	}), nil
}

// shutdownFields are the shutdown fields the configuration sets.
func shutdownFields(kc *kubeletconfigv1beta1.KubeletConfiguration) []string {
	var out []string
	if kc.ShutdownGracePeriod.Duration != 0 {
		out = append(out, "shutdownGracePeriod")
	}
	if kc.ShutdownGracePeriodCriticalPods.Duration != 0 {
		out = append(out, "shutdownGracePeriodCriticalPods")
	}
	if len(kc.ShutdownGracePeriodByPodPriority) > 0 {
		out = append(out, "shutdownGracePeriodByPodPriority")
	}
	return out
}

// shutdownPod stops a pod for the node's shutdown: it ends Failed with
// upstream's reason and message and a DisruptionTarget condition. It
// waits until the pod has stopped, at most half as long again as the
// grace period and no less than 10 s, as upstream's killPodNow.
func (k *Kubelet) shutdownPod(ctx context.Context, p *v1.Pod, grace int64) error {
	// A pod Skiff already fails (evicted) keeps that reason.
	k.fail(p, podFailure{reason: shutdown.Reason, message: shutdown.Message, disruption: true, at: metav1.NewTime(k.clock.Now())})
	k.workers.Terminate(p, &grace)
	timeout := max(time.Duration(grace)*time.Second*3/2, shutdownMinimumKillTimeout)
	deadline := k.clock.Now().Add(timeout)
	t := k.clock.NewTicker(shutdownKillPollInterval)
	defer t.Stop()
	for {
		if phase, ok := k.workers.Phase(p.UID); !ok || phase == podworker.Terminated {
			return nil
		}
		if !k.clock.Now().Before(deadline) {
			k.recorder.Eventf(p, v1.EventTypeWarning, "ExceededGracePeriod", "Container runtime did not kill the pod within specified grace period.")
			return fmt.Errorf("pod %s/%s did not stop within %v", p.Namespace, p.Name, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C():
		}
	}
}
