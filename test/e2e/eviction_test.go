//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// A pod whose emptyDir grows past its sizeLimit is evicted
// (Failed, reason Evicted, an Event naming the volume and the limit); a
// pod within its limit keeps running.
func TestEmptyDirSizeLimitEviction(t *testing.T) {
	cn := sharedNode(t)
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	withScratch := func(name, script string) *v1.Pod {
		p := busyboxPod(name, script)
		limit := resource.MustParse("2Mi")
		p.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: &limit}}}}
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
		return p
	}
	cn.createPod(t, withScratch("filler", "dd if=/dev/zero of=/scratch/fill bs=1M count=4; "+sleeper))
	cn.createPod(t, withScratch("modest", "dd if=/dev/zero of=/scratch/fill bs=1K count=512; "+sleeper))

	t.Cleanup(func() {
		if t.Failed() { // what Skiff itself thought of the pod
			p, _ := cn.pod("filler")
			if p != nil {
				t.Logf("filler as Skiff sees it: phase %s reason %q conditions %+v", p.Status.Phase, p.Status.Reason, p.Status.Conditions)
			}
			t.Logf("Skiff's log about the pod:\n%s", grepLines(cn.log(), "filler", 50))
		}
	})
	got := cn.waitPod(t, cn.ns, "filler", 60*time.Second, "evicted", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	want := `Usage of EmptyDir volume "scratch" exceeds the limit "2Mi".`
	if got.Status.Reason != "Evicted" || !strings.Contains(got.Status.Message, want) {
		t.Errorf("reason %q message %q", got.Status.Reason, got.Status.Message)
	}
	if cs := got.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Terminated == nil {
		t.Errorf("evicted pod's container is not terminated: %+v", cs)
	}
	cn.waitEvent(t, "Evicted", want)
	waitFor(t, 30*time.Second, "evicted pod's containers stopped", func() (bool, error) {
		for _, c := range containersOf(t, string(got.UID)) {
			if c.State.String() == "CONTAINER_RUNNING" {
				return false, nil
			}
		}
		return true, nil
	})
	if p := cn.getPod(t, "modest"); p.Status.Phase != v1.PodRunning {
		t.Errorf("the pod within its limit is %s (%s)", p.Status.Phase, p.Status.Reason)
	}
}
