package eviction

import (
	"time"

	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// observation is what a signal measured: what is available of capacity.
type observation struct {
	available, capacity int64
	time                time.Time
}

type observations map[Signal]observation

// podStatsFunc finds a pod's stats in the summary the observations came from.
type podStatsFunc func(pod *v1.Pod) (statsapi.PodStats, bool)

// observe derives the signals from a summary, as upstream's
// makeSignalObservations: memory.available is the node's available memory
// (capacity minus the root cgroup's working set), allocatableMemory.available
// the pods cgroup's, the filesystems' available bytes and free inodes, and
// pid.available the PID limit minus the running processes.
func observe(s *statsapi.Summary) (observations, podStatsFunc) {
	byUID := make(map[string]statsapi.PodStats, len(s.Pods))
	for _, p := range s.Pods {
		byUID[p.PodRef.UID] = p
	}
	stats := func(pod *v1.Pod) (statsapi.PodStats, bool) {
		p, ok := byUID[string(pod.UID)]
		return p, ok
	}
	out := observations{}
	if m := s.Node.Memory; m != nil && m.AvailableBytes != nil && m.WorkingSetBytes != nil {
		out[SignalMemoryAvailable] = observation{
			available: int64(*m.AvailableBytes), capacity: int64(*m.AvailableBytes + *m.WorkingSetBytes), time: m.Time.Time,
		}
	}
	for _, c := range s.Node.SystemContainers {
		if m := c.Memory; c.Name == statsapi.SystemContainerPods && m != nil && m.AvailableBytes != nil && m.WorkingSetBytes != nil {
			out[SignalAllocatableMemoryAvailable] = observation{
				available: int64(*m.AvailableBytes), capacity: int64(*m.AvailableBytes + *m.WorkingSetBytes), time: m.Time.Time,
			}
		}
	}
	fs := func(bytes, inodes Signal, f *statsapi.FsStats) {
		if f == nil || f.CapacityBytes == nil || *f.CapacityBytes == 0 {
			return // unmeasured: a filesystem of size 0 would look full
		}
		if f.AvailableBytes != nil && f.CapacityBytes != nil {
			out[bytes] = observation{available: int64(*f.AvailableBytes), capacity: int64(*f.CapacityBytes), time: f.Time.Time}
		}
		if f.InodesFree != nil && f.Inodes != nil {
			out[inodes] = observation{available: int64(*f.InodesFree), capacity: int64(*f.Inodes), time: f.Time.Time}
		}
	}
	fs(SignalNodeFsAvailable, SignalNodeFsInodesFree, s.Node.Fs)
	if r := s.Node.Runtime; r != nil {
		fs(SignalImageFsAvailable, SignalImageFsInodesFree, r.ImageFs)
		fs(SignalContainerFsAvailable, SignalContainerFsInodesFree, r.ContainerFs)
	}
	if r := s.Node.Rlimit; r != nil && r.MaxPID != nil && r.NumOfRunningProcesses != nil {
		out[SignalPIDAvailable] = observation{
			available: *r.MaxPID - *r.NumOfRunningProcesses, capacity: *r.MaxPID, time: r.Time.Time,
		}
	}
	return out, stats
}

// met returns the thresholds whose signal is below them; with minReclaim,
// below them plus their minimum reclaim (a threshold stays met until the
// reclaim is done).
func met(thresholds []Threshold, obs observations, minReclaim bool) []Threshold {
	var out []Threshold
	for _, t := range thresholds {
		o, ok := obs[t.Signal]
		if !ok {
			continue
		}
		q := t.Value.of(o.capacity)
		if minReclaim && t.MinReclaim != nil {
			q += t.MinReclaim.of(o.capacity)
		}
		if q > o.available {
			out = append(out, t)
		}
	}
	return out
}

// merge adds the thresholds of b not in a.
func merge(a, b []Threshold) []Threshold {
	out := append([]Threshold(nil), a...)
	for _, t := range b {
		found := false
		for _, have := range out {
			found = found || have.key() == t.key()
		}
		if !found {
			out = append(out, t)
		}
	}
	return out
}

// conditionsOf returns the node conditions the thresholds drive.
func conditionsOf(thresholds []Threshold) []v1.NodeConditionType {
	var out []v1.NodeConditionType
	for _, t := range thresholds {
		c, ok := signalCondition[t.Signal]
		if !ok {
			continue
		}
		dup := false
		for _, have := range out {
			dup = dup || have == c
		}
		if !dup {
			out = append(out, c)
		}
	}
	return out
}
