package eviction

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// Signal is an eviction signal, named as in evictionHard.
type Signal string

// The signals upstream's eviction manager knows.
const (
	SignalMemoryAvailable            Signal = "memory.available"
	SignalAllocatableMemoryAvailable Signal = "allocatableMemory.available"
	SignalNodeFsAvailable            Signal = "nodefs.available"
	SignalNodeFsInodesFree           Signal = "nodefs.inodesFree"
	SignalImageFsAvailable           Signal = "imagefs.available"
	SignalImageFsInodesFree          Signal = "imagefs.inodesFree"
	SignalContainerFsAvailable       Signal = "containerfs.available"
	SignalContainerFsInodesFree      Signal = "containerfs.inodesFree"
	SignalPIDAvailable               Signal = "pid.available"
)

// resourceInodes and resourcePIDs name what inode and PID signals reclaim
// in messages, as upstream.
const (
	resourceInodes v1.ResourceName = "inodes"
	resourcePIDs   v1.ResourceName = "pids"
)

// signalResource is the resource a signal measures; signalCondition the
// node condition it drives.
var (
	signalResource = map[Signal]v1.ResourceName{
		SignalMemoryAvailable: v1.ResourceMemory, SignalAllocatableMemoryAvailable: v1.ResourceMemory,
		SignalNodeFsAvailable: v1.ResourceEphemeralStorage, SignalNodeFsInodesFree: resourceInodes,
		SignalImageFsAvailable: v1.ResourceEphemeralStorage, SignalImageFsInodesFree: resourceInodes,
		SignalContainerFsAvailable: v1.ResourceEphemeralStorage, SignalContainerFsInodesFree: resourceInodes,
		SignalPIDAvailable: resourcePIDs,
	}
	signalCondition = map[Signal]v1.NodeConditionType{
		SignalMemoryAvailable: v1.NodeMemoryPressure, SignalAllocatableMemoryAvailable: v1.NodeMemoryPressure,
		SignalNodeFsAvailable: v1.NodeDiskPressure, SignalNodeFsInodesFree: v1.NodeDiskPressure,
		SignalImageFsAvailable: v1.NodeDiskPressure, SignalImageFsInodesFree: v1.NodeDiskPressure,
		SignalContainerFsAvailable: v1.NodeDiskPressure, SignalContainerFsInodesFree: v1.NodeDiskPressure,
		SignalPIDAvailable: v1.NodePIDPressure,
	}
)

// Value is a threshold amount: a quantity, or a fraction of the capacity.
type Value struct {
	Quantity   *resource.Quantity
	Percentage float32 // 0..1
}

// of is the value in bytes (or inodes, PIDs) given the signal's capacity.
func (v Value) of(capacity int64) int64 {
	if v.Quantity != nil {
		return v.Quantity.Value()
	}
	return int64(float64(v.Percentage) * float64(capacity))
}

func (v Value) String() string {
	if v.Quantity != nil {
		return v.Quantity.String()
	}
	return strconv.FormatFloat(float64(v.Percentage)*100, 'f', -1, 32) + "%"
}

// Threshold is one eviction threshold: hard when GracePeriod is zero.
type Threshold struct {
	Signal      Signal
	Value       Value
	GracePeriod time.Duration
	MinReclaim  *Value
}

func (t Threshold) hard() bool { return t.GracePeriod == 0 }

// key tells thresholds apart: a signal has at most one hard and one soft.
func (t Threshold) key() string {
	if t.hard() {
		return string(t.Signal) + "/hard"
	}
	return string(t.Signal) + "/soft"
}

// ParseThresholds turns the configuration's evictionHard, evictionSoft,
// evictionSoftGracePeriod and evictionMinimumReclaim into thresholds, as
// upstream's ParseThresholdConfig: with enforceNodeAllocatable "pods" a
// hard memory.available threshold is also one on allocatableMemory.available;
// containerfs.* follow nodefs.* (or imagefs.* with a dedicated image
// filesystem), and configured containerfs thresholds are ignored.
func ParseThresholds(kc *kubeletconfigv1beta1.KubeletConfiguration, dedicatedImageFs bool) ([]Threshold, []string, error) {
	var out []Threshold
	var warnings []string
	hard, err := parseStatements(kc.EvictionHard)
	if err != nil {
		return nil, nil, fmt.Errorf("evictionHard: %w", err)
	}
	soft, err := parseStatements(kc.EvictionSoft)
	if err != nil {
		return nil, nil, fmt.Errorf("evictionSoft: %w", err)
	}
	for i := range soft {
		v, ok := kc.EvictionSoftGracePeriod[string(soft[i].Signal)]
		if !ok {
			return nil, nil, fmt.Errorf("grace period must be specified for the soft eviction threshold %v", soft[i].Signal)
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return nil, nil, fmt.Errorf("evictionSoftGracePeriod[%s]: invalid duration %q", soft[i].Signal, v)
		}
		soft[i].GracePeriod = d
	}
	for _, t := range append(hard, soft...) {
		if t.Signal == SignalContainerFsAvailable || t.Signal == SignalContainerFsInodesFree {
			warnings = append(warnings, fmt.Sprintf("%s follows the filesystem the writable layers are on; its own threshold is ignored", t.Signal))
			continue
		}
		if v, ok := kc.EvictionMinimumReclaim[string(t.Signal)]; ok {
			mr, err := parseValue(v)
			if err != nil {
				return nil, nil, fmt.Errorf("evictionMinimumReclaim[%s]: %w", t.Signal, err)
			}
			t.MinReclaim = &mr
		}
		out = append(out, t)
	}
	if slices.Contains(kc.EnforceNodeAllocatable, "pods") {
		for _, t := range out {
			if t.Signal == SignalMemoryAvailable && t.hard() {
				out = append(out, Threshold{Signal: SignalAllocatableMemoryAvailable, Value: t.Value, MinReclaim: t.MinReclaim})
			}
		}
	}
	from := map[Signal]Signal{SignalContainerFsAvailable: SignalNodeFsAvailable, SignalContainerFsInodesFree: SignalNodeFsInodesFree}
	if dedicatedImageFs {
		from = map[Signal]Signal{SignalContainerFsAvailable: SignalImageFsAvailable, SignalContainerFsInodesFree: SignalImageFsInodesFree}
	}
	for _, t := range slices.Clone(out) {
		for cfs, src := range from {
			if t.Signal == src {
				t.Signal = cfs
				out = append(out, t)
			}
		}
	}
	return out, warnings, nil
}

// parseStatements parses a signal → value map; 0% and 100% switch a
// signal off, as upstream.
func parseStatements(m map[string]string) ([]Threshold, error) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []Threshold
	for _, k := range keys {
		s := Signal(k)
		if _, ok := signalResource[s]; !ok {
			return nil, fmt.Errorf("unsupported eviction signal %v", s)
		}
		v := strings.TrimSpace(m[k])
		if v == "0%" || v == "100%" {
			continue
		}
		val, err := parseValue(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		if val.Quantity != nil && val.Quantity.Sign() <= 0 {
			return nil, fmt.Errorf("%s: eviction threshold must be positive: %s", k, v)
		}
		out = append(out, Threshold{Signal: s, Value: val})
	}
	return out, nil
}

func parseValue(v string) (Value, error) {
	if strings.HasSuffix(v, "%") {
		f, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 32)
		if err != nil || f < 0 || f > 100 {
			return Value{}, fmt.Errorf("invalid percentage %q", v)
		}
		return Value{Percentage: float32(f / 100)}, nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return Value{}, fmt.Errorf("invalid quantity %q: %w", v, err)
	}
	return Value{Quantity: &q}, nil
}
