package nodestatus

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// The eviction manager's conditions become the Node's, with upstream's
// reasons and messages, and flip back when the pressure is over.
func TestPressureConditionsFollowEvictionManager(t *testing.T) {
	var under []v1.NodeConditionType
	env := newTestController(t, nil, func(c *Config) {
		c.Pressure = func() []v1.NodeConditionType { return under }
	})
	ctx := context.Background()
	env.c.runtime.update(ctx)
	node := &v1.Node{}
	env.c.setNodeStatus(ctx, node)
	if c := condition(t, node, v1.NodeMemoryPressure); c.Status != v1.ConditionFalse || c.Reason != "KubeletHasSufficientMemory" {
		t.Errorf("no pressure: %+v", c)
	}
	under = []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure}
	env.c.setNodeStatus(ctx, node)
	for typ, want := range map[v1.NodeConditionType][2]string{
		v1.NodeMemoryPressure: {"KubeletHasInsufficientMemory", "kubelet has insufficient memory available"},
		v1.NodeDiskPressure:   {"KubeletHasDiskPressure", "kubelet has disk pressure"},
	} {
		if c := condition(t, node, typ); c.Status != v1.ConditionTrue || c.Reason != want[0] || c.Message != want[1] {
			t.Errorf("%s: %+v", typ, c)
		}
	}
	if c := condition(t, node, v1.NodePIDPressure); c.Status != v1.ConditionFalse {
		t.Errorf("PIDPressure: %+v", c)
	}
	under = nil
	env.c.setNodeStatus(ctx, node)
	if c := condition(t, node, v1.NodeDiskPressure); c.Status != v1.ConditionFalse || c.Reason != "KubeletHasNoDiskPressure" {
		t.Errorf("pressure over: %+v", c)
	}
}
