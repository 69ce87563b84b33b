package eviction

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Local storage messages, as upstream's.
const (
	containerEphemeralStorageMessageFmt = "Container %s exceeded its local ephemeral storage limit %q. "
	podEphemeralStorageMessageFmt       = "Pod ephemeral local storage usage exceeds the total limit of containers %s. "
)

// message says why a pod is evicted for a resource, as upstream: the
// resource, the threshold and what was available, and each container
// using more than it requested.
func message(res v1.ResourceName, pod *v1.Pod, stats podStatsFunc, thresholds []Threshold, obs observations) string {
	msg := fmt.Sprintf(nodeLowMessageFmt, res)
	for _, t := range thresholds {
		if signalResource[t.Signal] != res {
			continue
		}
		if o, ok := obs[t.Signal]; ok {
			msg += fmt.Sprintf(thresholdMetMessageFmt, quantity(res, t.Value.of(o.capacity)), quantity(res, o.available))
			break
		}
	}
	ps, ok := stats(pod)
	if !ok {
		return msg
	}
	containers := append(append([]v1.Container(nil), pod.Spec.Containers...), pod.Spec.InitContainers...)
	for _, cs := range ps.Containers {
		for _, c := range containers {
			if c.Name != cs.Name {
				continue
			}
			req := c.Resources.Requests[res]
			var used *resource.Quantity
			switch res {
			case v1.ResourceEphemeralStorage:
				if cs.Rootfs != nil && cs.Rootfs.UsedBytes != nil && cs.Logs != nil && cs.Logs.UsedBytes != nil {
					used = resource.NewQuantity(int64(*cs.Rootfs.UsedBytes+*cs.Logs.UsedBytes), resource.BinarySI)
				}
			case v1.ResourceMemory:
				if cs.Memory != nil && cs.Memory.WorkingSetBytes != nil {
					used = resource.NewQuantity(int64(*cs.Memory.WorkingSetBytes), resource.BinarySI)
				}
			}
			if used != nil && used.Cmp(req) > 0 {
				msg += fmt.Sprintf(containerMessageFmt, c.Name, used.String(), req.String(), res)
			}
			break
		}
	}
	return msg
}

// quantity formats an amount of res as upstream: bytes in binary units,
// inodes and PIDs as plain numbers.
func quantity(res v1.ResourceName, n int64) *resource.Quantity {
	if res == resourceInodes || res == resourcePIDs {
		return resource.NewQuantity(n, resource.DecimalSI)
	}
	return resource.NewQuantity(n, resource.BinarySI)
}

// localStorage evicts the pods over their containers' or their own
// ephemeral-storage limits (writable layers and logs; with volumes for
// the pod's total), as upstream's localStorageEviction.
func (p *Pressure) localStorage(pods []*v1.Pod, stats podStatsFunc) []*v1.Pod {
	var out []*v1.Pod
	for _, pod := range pods {
		ps, ok := stats(pod)
		if !ok || IsCritical(pod) {
			continue
		}
		msg, signal := p.overStorageLimit(pod, ps)
		if msg == "" {
			continue
		}
		klog.InfoS("Evicting pod over its local storage limit", "pod", klog.KObj(pod), "message", msg)
		if p.cfg.Evict(pod, immediateGracePeriod, msg) {
			p.cfg.Metrics.Evictions.WithLabelValues(signal).Inc()
			out = append(out, pod)
		}
	}
	return out
}

// overStorageLimit returns the eviction message and signal of a pod over
// its total ephemeral-storage limit or a container over its own, "" when
// neither is.
func (p *Pressure) overStorageLimit(pod *v1.Pod, ps statsapi.PodStats) (string, string) {
	if limit, ok := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})[v1.ResourceEphemeralStorage]; ok {
		used := diskOf(ps, pod, fsUse{rootfs: true, logs: true, volumes: true}, false)
		if used > limit.Value() {
			return fmt.Sprintf(podEphemeralStorageMessageFmt, limit.String()), "ephemeralpodfs.limit"
		}
	}
	limits := map[string]*resource.Quantity{}
	for _, c := range pod.Spec.Containers {
		if l := c.Resources.Limits.StorageEphemeral(); l != nil && l.Value() != 0 {
			limits[c.Name] = l
		}
	}
	for _, cs := range ps.Containers {
		limit, ok := limits[cs.Name]
		if !ok {
			continue
		}
		var used int64
		if cs.Logs != nil && cs.Logs.UsedBytes != nil {
			used += int64(*cs.Logs.UsedBytes)
		}
		if !p.cfg.DedicatedImageFs && cs.Rootfs != nil && cs.Rootfs.UsedBytes != nil {
			used += int64(*cs.Rootfs.UsedBytes)
		}
		if used > limit.Value() {
			return fmt.Sprintf(containerEphemeralStorageMessageFmt, cs.Name, limit.String()), "ephemeralcontainerfs.limit"
		}
	}
	return "", ""
}
