//go:build e2e

package e2e

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// A running Burstable pod's CPU and memory grow and then shrink in place:
// the same container, not restarted, gets the new shares, CFS quota and
// memory limit, and so does its pod cgroup; the pod's status reports the
// new resources, the generation it observed, and no resize condition once
// done.
func TestResizeInPlaceUpAndDown(t *testing.T) { resizeInPlaceUpAndDown(t, sharedNode(t)) }

func resizeInPlaceUpAndDown(t *testing.T, cn *clusterNode) {
	p := busyboxPod("resize-updown", sleeper)
	p.Spec.Containers[0].Resources = res("100m", "32Mi", "200m", "64Mi")
	cn.createPod(t, p)
	p = cn.waitPod(t, cn.ns, p.Name, 60*time.Second, "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	id := statusOf(p, "main").ContainerID
	if r := statusOf(p, "main").Resources; r == nil || !sameResources(*r, res("100m", "32Mi", "200m", "64Mi")) {
		// Before any resize the runtime's values and the allocated ones agree.
		t.Fatalf("status resources before any resize %+v, want the spec's (the apiserver allows resizes only then)", r)
	}

	steps := []struct {
		name  string
		to    v1.ResourceRequirements
		cg    cgroupLimits // the container's and the pod's
		shown v1.ResourceRequirements
	}{
		{"up", res("200m", "64Mi", "400m", "128Mi"), cgroupLimits{"204", "40000", "134217728"}, res("200m", "64Mi", "400m", "128Mi")},
		{"down", res("50m", "16Mi", "100m", "48Mi"), cgroupLimits{"51", "10000", "50331648"}, res("50m", "16Mi", "100m", "48Mi")},
	}
	for _, s := range steps {
		gen := cn.resize(t, p.Name, false, map[string]v1.ResourceRequirements{"main": s.to})
		got := cn.waitResized(t, p.Name, gen, map[string]v1.ResourceRequirements{"main": s.shown})
		cs := statusOf(got, "main")
		if cs.ContainerID != id || cs.RestartCount != 0 || cs.State.Running == nil {
			t.Errorf("%s: container %s restarts %d running %v, want %s still running, never restarted", s.name, cs.ContainerID, cs.RestartCount, cs.State.Running != nil, id)
		}
		if got.Status.ObservedGeneration != got.Generation {
			t.Errorf("%s: observedGeneration %d, generation %d", s.name, got.Status.ObservedGeneration, got.Generation)
		}
		for _, c := range got.Status.Conditions {
			if c.ObservedGeneration != got.Generation {
				t.Errorf("%s: condition %s observedGeneration %d, want %d", s.name, c.Type, c.ObservedGeneration, got.Generation)
			}
		}
		podCg, ctrCg := containerCgroup(cn.cgroupRoot(), got, "main")
		checkCgroups(t, s.name+": container", ctrCg, s.cg)
		checkCgroups(t, s.name+": pod", podCg, s.cg)
	}
}

// A container whose resize policy says RestartContainer for memory is
// restarted to take a new memory limit; its neighbour, resized too, keeps
// running in place. Both cgroups get the new limit.
func TestResizeRestartContainerPolicy(t *testing.T) { resizeRestartContainerPolicy(t, sharedNode(t)) }

func resizeRestartContainerPolicy(t *testing.T, cn *clusterNode) {
	p := busyboxPod("resize-policy", sleeper)
	p.Spec.Containers[0].Name = "restarts"
	p.Spec.Containers[0].Resources = res("100m", "32Mi", "100m", "32Mi")
	p.Spec.Containers[0].ResizePolicy = []v1.ContainerResizePolicy{{ResourceName: v1.ResourceMemory, RestartPolicy: v1.RestartContainer}}
	inPlace := p.Spec.Containers[0]
	inPlace.Name, inPlace.ResizePolicy = "stays", nil
	p.Spec.Containers = append(p.Spec.Containers, inPlace)
	cn.createPod(t, p)
	p = cn.waitPod(t, cn.ns, p.Name, 60*time.Second, "Running", isReady)
	before := map[string]string{"restarts": statusOf(p, "restarts").ContainerID, "stays": statusOf(p, "stays").ContainerID}

	to := res("100m", "48Mi", "100m", "48Mi")
	want := map[string]v1.ResourceRequirements{"restarts": to, "stays": to}
	gen := cn.resize(t, p.Name, false, want)
	got := cn.waitResized(t, p.Name, gen, want)
	if cs := statusOf(got, "restarts"); cs.ContainerID == before["restarts"] || cs.RestartCount != 1 {
		t.Errorf("RestartContainer: container %s restarts %d, want a new container, restarted once", cs.ContainerID, cs.RestartCount)
	}
	if cs := statusOf(got, "stays"); cs.ContainerID != before["stays"] || cs.RestartCount != 0 {
		t.Errorf("NotRequired: container %s restarts %d, want %s in place", cs.ContainerID, cs.RestartCount, before["stays"])
	}
	got = cn.waitPod(t, cn.ns, p.Name, 60*time.Second, "Ready again", isReady)
	for _, name := range []string{"restarts", "stays"} {
		_, ctrCg := containerCgroup(cn.cgroupRoot(), got, name)
		if m := cgroupFile(t, "memory", ctrCg, "memory.limit_in_bytes"); m != "50331648" {
			t.Errorf("%s: memory limit %s, want 48Mi", name, m)
		}
	}
	podCg, _ := containerCgroup(cn.cgroupRoot(), got, "stays")
	if m := cgroupFile(t, "memory", podCg, "memory.limit_in_bytes"); m != "100663296" {
		t.Errorf("pod memory limit %s, want 96Mi", m)
	}
}

// A sidecar (a restartable init container) is resized in place, and its
// status, among the init containers', shows it.
func TestResizeSidecar(t *testing.T) { resizeSidecar(t, sharedNode(t)) }

func resizeSidecar(t *testing.T, cn *clusterNode) {
	p := busyboxPod("resize-sidecar", sleeper)
	always := v1.ContainerRestartPolicyAlways
	p.Spec.InitContainers = []v1.Container{{
		Name: "side", Image: busybox, ImagePullPolicy: v1.PullNever, Command: []string{"sh", "-c", sleeper},
		RestartPolicy: &always, Resources: res("100m", "32Mi", "200m", "64Mi"),
	}}
	p.Spec.Containers[0].Resources = res("100m", "32Mi", "200m", "64Mi")
	cn.createPod(t, p)
	p = cn.waitPod(t, cn.ns, p.Name, 60*time.Second, "Ready", isReady)
	id := statusOf(p, "side").ContainerID

	to := res("300m", "48Mi", "300m", "96Mi")
	gen := cn.resize(t, p.Name, true, map[string]v1.ResourceRequirements{"side": to})
	got := cn.waitResized(t, p.Name, gen, map[string]v1.ResourceRequirements{"side": to, "main": res("100m", "32Mi", "200m", "64Mi")})
	if cs := statusOf(got, "side"); cs.ContainerID != id || cs.RestartCount != 0 {
		t.Errorf("sidecar %s restarts %d, want %s in place", cs.ContainerID, cs.RestartCount, id)
	}
	podCg, ctrCg := containerCgroup(cn.cgroupRoot(), got, "side")
	checkCgroups(t, "sidecar", ctrCg, cgroupLimits{"307", "30000", "100663296"})
	checkCgroups(t, "pod", podCg, cgroupLimits{"409", "50000", "167772160"})
}
