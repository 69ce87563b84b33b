package kubelet

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A pod whose claim is not bound waits with its container in
// ContainerCreating and a FailedMount event naming the claim, creates no
// container meanwhile, and starts by itself once the claim is bound; the
// volume manager's retries run on the Kubelet's clock.
func TestPodWaitsForItsClaimAndStartsOnceBound(t *testing.T) {
	m := newMachine(t)
	ctx := context.Background()
	pvc := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "default", UID: "claim-uid"},
		Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimPending}}
	if _, err := m.client.CoreV1().PersistentVolumeClaims("default").Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	k, _ := m.start()
	p := newPod("db")
	p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{
		PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	m.createPod(p)

	waiting := m.waitPod("db", "waiting for its volume", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == "ContainerCreating"
	})
	m.eventually("a FailedMount event naming the claim", func() bool {
		evs, err := m.client.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.Reason == "FailedMount" && strings.Contains(e.Message, "PVC default/data has non-bound phase") {
				return true
			}
		}
		return false
	})
	m.holds("no container while the claim is unbound", func() bool { return len(m.containers(waiting.UID)) == 0 })

	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-data"}, Spec: v1.PersistentVolumeSpec{
		PersistentVolumeSource: v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: t.TempDir()}},
		ClaimRef:               &v1.ObjectReference{Namespace: "default", Name: "data", UID: "claim-uid"},
	}}
	if _, err := m.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pvc.Spec.VolumeName, pvc.Status.Phase = "pv-data", v1.ClaimBound
	if _, err := m.client.CoreV1().PersistentVolumeClaims("default").Update(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	m.waitPod("db", "running once the claim is bound", running)

	m.deletePod("db")
	m.eventually("the pod forgotten", func() bool { return m.forgotten(k, waiting.UID) })
}
