package nodestatus

import (
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// Eviction signals that reserve capacity (upstream's hardEvictionReservation
// knows only these two).
const (
	signalMemoryAvailable = "memory.available"
	signalNodeFsAvailable = "nodefs.available"
)

// threshold is a hard eviction threshold: an absolute quantity or a fraction
// of capacity.
type threshold struct {
	quantity   *resource.Quantity
	percentage float32
}

// reservations is what node allocatable subtracts from capacity: kube and
// system reserved plus the hard eviction thresholds.
type reservations struct {
	kube, system v1.ResourceList
	memory       *threshold // memory.available
	nodefs       *threshold // nodefs.available
}

func parseReservations(kc *kubeletconfigv1beta1.KubeletConfiguration) (*reservations, error) {
	r := &reservations{}
	var err error
	if r.kube, err = parseResourceList(kc.KubeReserved); err != nil {
		return nil, fmt.Errorf("kubeReserved: %w", err)
	}
	if r.system, err = parseResourceList(kc.SystemReserved); err != nil {
		return nil, fmt.Errorf("systemReserved: %w", err)
	}
	if r.memory, err = parseThreshold(kc.EvictionHard[signalMemoryAvailable]); err != nil {
		return nil, fmt.Errorf("evictionHard[%s]: %w", signalMemoryAvailable, err)
	}
	if r.nodefs, err = parseThreshold(kc.EvictionHard[signalNodeFsAvailable]); err != nil {
		return nil, fmt.Errorf("evictionHard[%s]: %w", signalNodeFsAvailable, err)
	}
	return r, nil
}

func parseResourceList(m map[string]string) (v1.ResourceList, error) {
	if len(m) == 0 {
		return nil, nil
	}
	l := v1.ResourceList{}
	for k, v := range m {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("%s=%q: %w", k, v, err)
		}
		l[v1.ResourceName(k)] = q
	}
	return l, nil
}

// parseThreshold parses an evictionHard value. "" (signal not set), "0%" and
// "100%" mean no threshold, as upstream.
func parseThreshold(v string) (*threshold, error) {
	if v == "" || v == "0%" || v == "100%" {
		return nil, nil
	}
	if s, ok := strings.CutSuffix(v, "%"); ok {
		// float32 as upstream, so percentages give byte-identical results.
		f, err := strconv.ParseFloat(s, 32)
		if err != nil {
			return nil, fmt.Errorf("invalid percentage %q: %w", v, err)
		}
		p := float32(f) / 100
		if p <= 0 || p > 1 {
			return nil, fmt.Errorf("percentage %q must be between 0%% and 100%%", v)
		}
		return &threshold{percentage: p}, nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return nil, err
	}
	if q.Sign() <= 0 {
		return nil, fmt.Errorf("%q must be positive", v)
	}
	return &threshold{quantity: &q}, nil
}

// of is the threshold as a quantity of capacity c.
func (t *threshold) of(c resource.Quantity) resource.Quantity {
	if t.quantity != nil {
		return t.quantity.DeepCopy()
	}
	return *resource.NewQuantity(int64(float64(c.Value())*float64(t.percentage)), resource.BinarySI)
}

// reserved is, per resource of capacity, the amount allocatable leaves out
// (upstream's GetNodeAllocatableReservation). Resources with nothing
// reserved are absent.
func (r *reservations) reserved(capacity v1.ResourceList) v1.ResourceList {
	eviction := v1.ResourceList{}
	if r.memory != nil {
		eviction[v1.ResourceMemory] = r.memory.of(capacity[v1.ResourceMemory])
	}
	if r.nodefs != nil {
		eviction[v1.ResourceEphemeralStorage] = r.nodefs.of(capacity[v1.ResourceEphemeralStorage])
	}
	out := v1.ResourceList{}
	for name := range capacity {
		v := resource.NewQuantity(0, resource.DecimalSI)
		v.Add(r.system[name])
		v.Add(r.kube[name])
		v.Add(eviction[name])
		if !v.IsZero() {
			out[name] = *v
		}
	}
	return out
}

// capacity is the machine's capacity: cpu, memory, huge pages, pods and,
// with local storage capacity isolation, ephemeral-storage (-1 when the
// filesystem size is unknown: the resource is then left out).
func (m *machine) capacity(maxPods int64, ephemeralBytes int64) v1.ResourceList {
	c := v1.ResourceList{
		v1.ResourceCPU:    *resource.NewMilliQuantity(int64(m.numCPU)*1000, resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(m.memoryBytes, resource.BinarySI),
		v1.ResourcePods:   *resource.NewQuantity(maxPods, resource.DecimalSI),
	}
	for size, n := range m.hugePages {
		c[hugePageResource(size)] = *resource.NewQuantity(size*n, resource.BinarySI)
	}
	if ephemeralBytes >= 0 {
		c[v1.ResourceEphemeralStorage] = *resource.NewQuantity(ephemeralBytes, resource.BinarySI)
	}
	return c
}

// allocatable is capacity minus reserved, never negative, with huge pages
// also taken out of memory (they are not available to ordinary pages).
func allocatable(capacity, reserved v1.ResourceList) v1.ResourceList {
	a := v1.ResourceList{}
	for name, c := range capacity {
		v := c.DeepCopy()
		if r, ok := reserved[name]; ok {
			v.Sub(r)
		}
		if v.Sign() < 0 {
			v.Set(0)
		}
		a[name] = v
	}
	mem, ok := a[v1.ResourceMemory]
	if !ok {
		return a
	}
	for name, c := range capacity {
		if strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix) {
			mem.Sub(c)
		}
	}
	if mem.Sign() < 0 {
		mem.Set(0)
	}
	a[v1.ResourceMemory] = mem
	return a
}

// podsCapacity is maxPods, lowered to podsPerCore × cores when that is set.
func podsCapacity(kc *kubeletconfigv1beta1.KubeletConfiguration, cores int) int64 {
	pods := int64(kc.MaxPods)
	if kc.PodsPerCore > 0 {
		pods = min(pods, int64(kc.PodsPerCore)*int64(cores))
	}
	return pods
}
