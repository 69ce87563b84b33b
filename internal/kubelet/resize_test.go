package kubelet

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A resize of a running pod's spec is allocated, applied through
// UpdateContainerResources without a restart, and reported: the new
// generation observed, and no resize condition left.
func TestResizeAppliedInPlace(t *testing.T) {
	m := newMachine(t)
	m.start()
	p := newPod("resized")
	cpu := func(q string) v1.ResourceRequirements {
		return v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(q)}}
	}
	p.Spec.Containers[0].Resources = cpu("100m")
	p.Generation = 1
	m.createPod(p)
	before := m.waitPod("resized", "running with its resources reported", func(p *v1.Pod) bool {
		r := p.Status.ContainerStatuses
		return running(p) && len(r) == 1 && r[0].Resources != nil && r[0].Resources.Requests.Cpu().MilliValue() == 100
	})

	before.Spec.Containers[0].Resources = cpu("200m")
	before.Generation = 2
	if _, err := m.client.CoreV1().Pods("default").Update(context.Background(), before, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The fake runtime reports no resources of its containers: as
	// upstream, the status keeps showing what it showed before.
	after := m.waitPod("resized", "observed", func(p *v1.Pod) bool { return p.Status.ObservedGeneration == 2 })
	m.eventually("the resize done", func() bool {
		p := m.apiPod("resized")
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodResizePending || c.Type == v1.PodResizeInProgress {
				return false
			}
		}
		return true
	})
	if cs := after.Status.ContainerStatuses[0]; cs.RestartCount != 0 || cs.ContainerID != before.Status.ContainerStatuses[0].ContainerID {
		t.Errorf("container %s restarts %d: want it resized in place", cs.ContainerID, cs.RestartCount)
	}
	if m.calls("UpdateContainerResources") == 0 {
		t.Error("the running container's resources were never updated")
	}
}
