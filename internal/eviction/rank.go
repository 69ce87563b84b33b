package eviction

import (
	"sort"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// fsUse says which parts of a pod's storage a disk signal counts.
type fsUse struct {
	rootfs, logs, volumes bool
}

// rankFunc orders pods, the first to be evicted first.
type rankFunc func(pods []*v1.Pod, stats podStatsFunc)

// cmpFunc compares two pods: negative when p1 goes first.
type cmpFunc func(p1, p2 *v1.Pod) int

func orderBy(pods []*v1.Pod, cmps ...cmpFunc) {
	sort.SliceStable(pods, func(i, j int) bool {
		for _, c := range cmps {
			if r := c(pods[i], pods[j]); r != 0 {
				return r < 0
			}
		}
		return false
	})
}

// rankFor returns how pods are ranked for a signal, as upstream: by usage
// above requests, then priority, then usage relative to requests; PIDs by
// priority, then process count.
func rankFor(s Signal, dedicatedImageFs bool) rankFunc {
	switch signalResource[s] {
	case v1.ResourceMemory:
		return func(pods []*v1.Pod, st podStatsFunc) {
			orderBy(pods, exceeds(st, memoryOf, v1.ResourceMemory), priority, usage(st, memoryOf, v1.ResourceMemory))
		}
	case resourcePIDs:
		return func(pods []*v1.Pod, st podStatsFunc) { orderBy(pods, priority, usage(st, processesOf, "")) }
	}
	use := fsUse{rootfs: true, logs: true, volumes: true}
	if dedicatedImageFs {
		switch s {
		case SignalNodeFsAvailable, SignalNodeFsInodesFree:
			use = fsUse{logs: true, volumes: true}
		default:
			use = fsUse{rootfs: true}
		}
	}
	inodes := signalResource[s] == resourceInodes
	of := func(ps statsapi.PodStats, pod *v1.Pod) int64 { return diskOf(ps, pod, use, inodes) }
	return func(pods []*v1.Pod, st podStatsFunc) {
		orderBy(pods, exceeds(st, of, v1.ResourceEphemeralStorage), priority, usage(st, of, v1.ResourceEphemeralStorage))
	}
}

type usageFunc func(ps statsapi.PodStats, pod *v1.Pod) int64

// exceeds puts pods using more than they request first; pods without
// stats go before all others.
func exceeds(st podStatsFunc, of usageFunc, r v1.ResourceName) cmpFunc {
	return func(p1, p2 *v1.Pod) int {
		s1, ok1 := st(p1)
		s2, ok2 := st(p2)
		if !ok1 || !ok2 {
			return cmpBool(!ok1, !ok2)
		}
		return cmpBool(of(s1, p1) > request(p1, r), of(s2, p2) > request(p2, r))
	}
}

// usage puts the larger use above requests first.
func usage(st podStatsFunc, of usageFunc, r v1.ResourceName) cmpFunc {
	return func(p1, p2 *v1.Pod) int {
		s1, ok1 := st(p1)
		s2, ok2 := st(p2)
		if !ok1 || !ok2 {
			return cmpBool(!ok1, !ok2)
		}
		u1, u2 := of(s1, p1)-request(p1, r), of(s2, p2)-request(p2, r)
		switch {
		case u1 > u2:
			return -1
		case u1 < u2:
			return 1
		}
		return 0
	}
}

// priority puts the lower priority first.
func priority(p1, p2 *v1.Pod) int {
	a, b := corev1helpers.PodPriority(p1), corev1helpers.PodPriority(p2)
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// cmpBool puts true first.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

func request(pod *v1.Pod, r v1.ResourceName) int64 {
	if r == "" {
		return 0
	}
	q, ok := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})[r]
	if !ok {
		return 0
	}
	return q.Value()
}

func memoryOf(ps statsapi.PodStats, _ *v1.Pod) int64 {
	if ps.Memory == nil || ps.Memory.WorkingSetBytes == nil {
		return 0
	}
	return int64(*ps.Memory.WorkingSetBytes)
}

func processesOf(ps statsapi.PodStats, _ *v1.Pod) int64 {
	if ps.ProcessStats == nil || ps.ProcessStats.ProcessCount == nil {
		return 0
	}
	return int64(*ps.ProcessStats.ProcessCount)
}

// diskOf is a pod's use of disk (bytes or inodes): its containers'
// writable layers and logs and its local volumes, as use says.
func diskOf(ps statsapi.PodStats, pod *v1.Pod, use fsUse, inodes bool) int64 {
	var n int64
	add := func(f *statsapi.FsStats) {
		switch {
		case f == nil:
		case inodes && f.InodesUsed != nil:
			n += int64(*f.InodesUsed)
		case !inodes && f.UsedBytes != nil:
			n += int64(*f.UsedBytes)
		}
	}
	for _, c := range ps.Containers {
		if use.rootfs {
			add(c.Rootfs)
		}
		if use.logs {
			add(c.Logs)
		}
	}
	if use.volumes {
		local := map[string]bool{}
		for _, v := range pod.Spec.Volumes {
			if v.HostPath != nil || v.EmptyDir != nil && v.EmptyDir.Medium == v1.StorageMediumDefault ||
				v.ConfigMap != nil || v.GitRepo != nil {
				local[v.Name] = true
			}
		}
		for i := range ps.VolumeStats {
			if local[ps.VolumeStats[i].Name] {
				add(&ps.VolumeStats[i].FsStats)
			}
		}
	}
	return n
}
