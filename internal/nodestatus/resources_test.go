package nodestatus

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestCapacityAndAllocatable(t *testing.T) {
	env := newTestController(t, nil, func(c *Config) {
		c.Kubelet.KubeReserved = map[string]string{"cpu": "100m", "memory": "100Mi", "ephemeral-storage": "1Gi"}
		c.Kubelet.SystemReserved = map[string]string{"cpu": "200m", "memory": "200Mi"}
	})
	capacity := env.c.capacity()
	got := allocatable(capacity, env.c.res.reserved(capacity))

	// nodefs.available<10% reserves 10% of 100 GiB computed as upstream
	// does, with a float32 fraction.
	tenPercent := int64(float64(100*gi) * float64(float32(10)/100))
	want := map[v1.ResourceName][2]resource.Quantity{
		v1.ResourceCPU: {q("4"), q("3700m")},
		// 8Gi - 100Mi kube - 200Mi system - 100Mi eviction - 1Gi huge pages
		v1.ResourceMemory:                  {q("8Gi"), *resource.NewQuantity(8*gi-400*mi-gi, resource.BinarySI)},
		v1.ResourcePods:                    {q("110"), q("110")},
		v1.ResourceEphemeralStorage:        {q("100Gi"), *resource.NewQuantity(100*gi-gi-tenPercent, resource.BinarySI)},
		v1.ResourceHugePagesPrefix + "2Mi": {q("1Gi"), q("1Gi")},
		v1.ResourceHugePagesPrefix + "1Gi": {q("0"), q("0")},
	}
	if len(capacity) != len(want) || len(got) != len(want) {
		t.Fatalf("capacity %v, allocatable %v: want the resources of %v", capacity, got, want)
	}
	for name, w := range want {
		if c := capacity[name]; c.Cmp(w[0]) != 0 {
			t.Errorf("capacity[%s] = %s, want %s", name, c.String(), w[0].String())
		}
		if a := got[name]; a.Cmp(w[1]) != 0 {
			t.Errorf("allocatable[%s] = %s, want %s", name, a.String(), w[1].String())
		}
	}
	// Serialized like upstream: memory in Ki, cpu as a plain number.
	if s := capacity.Memory().String(); s != "8Gi" {
		t.Errorf("memory capacity serializes as %s", s)
	}
	if s := got.Cpu().String(); s != "3700m" {
		t.Errorf("cpu allocatable serializes as %s", s)
	}
	if a := env.c.Allocatable(); a.Cpu().Cmp(q("3700m")) != 0 {
		t.Errorf("Allocatable() cpu = %s, want 3700m", a.Cpu())
	}
}

func TestAllocatableNeverNegativeAndPodsPerCore(t *testing.T) {
	env := newTestController(t, nil, func(c *Config) {
		c.Kubelet.KubeReserved = map[string]string{"cpu": "10"}
		c.Kubelet.PodsPerCore = 5
		c.Kubelet.EvictionHard = map[string]string{"memory.available": "0%", "nodefs.available": "100%"}
	})
	capacity := env.c.capacity()
	got := allocatable(capacity, env.c.res.reserved(capacity))
	if !got.Cpu().IsZero() {
		t.Errorf("cpu allocatable = %s, want 0", got.Cpu())
	}
	if got.Pods().Value() != 20 {
		t.Errorf("pods = %s, want 4 cores x 5", got.Pods())
	}
	// 0% and 100% switch a threshold off.
	if e := got[v1.ResourceEphemeralStorage]; e.Value() != 100*gi {
		t.Errorf("ephemeral-storage allocatable = %s, want all of it", e.String())
	}
	if m := got.Memory(); m.Value() != 8*gi-gi {
		t.Errorf("memory allocatable = %s, want capacity minus huge pages", m)
	}
}

func TestParseThreshold(t *testing.T) {
	for _, bad := range []string{"abc", "-1Mi", "0", "150%"} {
		if _, err := parseThreshold(bad); err == nil {
			t.Errorf("parseThreshold(%q) accepted it", bad)
		}
	}
	th, err := parseThreshold("5%")
	if err != nil {
		t.Fatal(err)
	}
	if v := th.of(q("1000")); v.Value() != 50 {
		t.Errorf("5%% of 1000 = %s", v.String())
	}
}

func TestNoEphemeralStorageWithoutIsolation(t *testing.T) {
	env := newTestController(t, nil, func(c *Config) { c.Kubelet.LocalStorageCapacityIsolation = new(bool) })
	if _, ok := env.c.capacity()[v1.ResourceEphemeralStorage]; ok {
		t.Error("ephemeral-storage reported with localStorageCapacityIsolation off")
	}
}
