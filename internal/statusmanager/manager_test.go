package statusmanager

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// apiPods serves Latest from the fake clientset, as the informer would.
type apiPods struct {
	client  *fake.Clientset
	mirrors map[types.UID]string // static pod UID → mirror pod name
}

func (a apiPods) Latest(pod *v1.Pod) (*v1.Pod, bool) {
	name := pod.Name
	if m, ok := a.mirrors[pod.UID]; ok {
		name = m
	}
	// The tracker, not the clientset: reads must not count as requests,
	// as the informer's do not.
	obj, err := a.client.Tracker().Get(v1.SchemeGroupVersion.WithResource("pods"), pod.Namespace, name)
	if err != nil {
		return nil, false
	}
	return obj.(*v1.Pod), true
}

func newPod(name string, uid types.UID) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: uid, ResourceVersion: "1"},
		Status: v1.PodStatus{
			Phase:      v1.PodPending,
			Conditions: []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue, Reason: "by-scheduler"}},
		},
	}
}

func running() v1.PodStatus {
	return v1.PodStatus{
		Phase: v1.PodRunning,
		PodIP: "10.0.0.1",
		Conditions: []v1.PodCondition{
			{Type: v1.PodReady, Status: v1.ConditionTrue},
			{Type: v1.PodScheduled, Status: v1.ConditionTrue, Reason: "from-kubelet", ObservedGeneration: 4},
		},
	}
}

func actions(c *fake.Clientset, verb string) []k8stesting.Action {
	var out []k8stesting.Action
	for _, a := range c.Actions() {
		if a.GetVerb() == verb {
			out = append(out, a)
		}
	}
	return out
}

func TestStatusIsPatchedOnceAndMerged(t *testing.T) {
	pod := newPod("p", "u1")
	client := fake.NewClientset(pod)
	m := New(Config{Client: client.CoreV1(), Pods: apiPods{client: client}})
	ctx := context.Background()

	m.SetPodStatus(pod, running())
	m.syncAll(ctx, true)
	got, _ := client.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{})
	if got.Status.Phase != v1.PodRunning || got.Status.PodIP != "10.0.0.1" {
		t.Fatalf("status not written: %+v", got.Status)
	}
	var scheduled *v1.PodCondition
	for i := range got.Status.Conditions {
		if got.Status.Conditions[i].Type == v1.PodScheduled {
			scheduled = &got.Status.Conditions[i]
		}
	}
	if scheduled == nil || scheduled.Reason != "by-scheduler" {
		t.Errorf("the scheduler's PodScheduled condition must be kept: %+v", got.Status.Conditions)
	}
	if scheduled != nil && scheduled.ObservedGeneration != 4 {
		t.Errorf("PodScheduled observedGeneration %d, want the kubelet's 4", scheduled.ObservedGeneration)
	}
	if n := len(actions(client, "patch")); n != 1 {
		t.Fatalf("%d patches, want 1", n)
	}
	// Same status again: no request at all (no GET either).
	before := len(client.Actions())
	m.SetPodStatus(pod, running())
	m.syncAll(ctx, true)
	if extra := client.Actions()[before:]; len(extra) != 0 {
		t.Errorf("unchanged status caused requests: %v", extra)
	}
}

// UpdateStatus changes the recorded status in place and reports it; a
// change that changes nothing, or a pod with no status yet, sends nothing.
func TestUpdateStatusChangesTheRecordedStatus(t *testing.T) {
	pod := newPod("p", "u1")
	client := fake.NewClientset(pod)
	m := New(Config{Client: client.CoreV1(), Pods: apiPods{client: client}})
	ctx := context.Background()
	m.UpdateStatus("u1", func(*v1.Pod, *v1.PodStatus) bool { t.Error("changed a pod with no status"); return true })

	m.SetPodStatus(pod, running())
	m.syncAll(ctx, true)
	m.UpdateStatus("u1", func(p *v1.Pod, s *v1.PodStatus) bool {
		if p.UID != "u1" {
			t.Errorf("given pod %s", p.UID)
		}
		s.PodIP = "10.0.0.2"
		return true
	})
	m.syncAll(ctx, true)
	got, _ := client.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{})
	if got.Status.PodIP != "10.0.0.2" {
		t.Fatalf("the changed status was not written: %+v", got.Status)
	}
	if st, _ := m.Status("u1"); st.PodIP != "10.0.0.2" {
		t.Errorf("recorded status %+v", st)
	}
	before := len(client.Actions())
	m.UpdateStatus("u1", func(_ *v1.Pod, s *v1.PodStatus) bool { return true })
	m.UpdateStatus("u1", func(_ *v1.Pod, s *v1.PodStatus) bool { s.PodIP = "10.0.0.9"; return false })
	m.syncAll(ctx, true)
	if extra := client.Actions()[before:]; len(extra) != 0 {
		t.Errorf("no change, yet requests: %v", extra)
	}
	if st, _ := m.Status("u1"); st.PodIP != "10.0.0.2" {
		t.Errorf("a change said to be none was kept: %+v", st)
	}
}

// A status computed from a recorded one is not recorded once that one
// changed meanwhile; at its version it is.
func TestSetPodStatusAtRefusesAStaleVersion(t *testing.T) {
	pod := newPod("p", "u1")
	client := fake.NewClientset(pod)
	m := New(Config{Client: client.CoreV1(), Pods: apiPods{client: client}})
	if _, v, ok := m.StatusVersion("u1"); ok || v != 0 {
		t.Fatalf("a pod with no status: version %d, %v", v, ok)
	}
	if !m.SetPodStatusAt(pod, running(), 0) {
		t.Fatal("the first status at version 0 was refused")
	}
	_, v, _ := m.StatusVersion("u1")
	m.UpdateStatus("u1", func(_ *v1.Pod, s *v1.PodStatus) bool { s.PodIP = "10.0.0.2"; return true })
	stale := running()
	stale.PodIP = "10.0.0.3"
	if m.SetPodStatusAt(pod, stale, v) {
		t.Error("a status computed before a change was recorded over it")
	}
	if st, _ := m.Status("u1"); st.PodIP != "10.0.0.2" {
		t.Errorf("recorded status %+v", st)
	}
	_, v, _ = m.StatusVersion("u1")
	if !m.SetPodStatusAt(pod, stale, v) {
		t.Error("a status at the current version was refused")
	}
	if st, _ := m.Status("u1"); st.PodIP != "10.0.0.3" {
		t.Errorf("recorded status %+v", st)
	}
	m.RemovePod("u1")
	if m.SetPodStatusAt(pod, stale, v) {
		t.Error("a status at a removed pod's version was recorded")
	}
}

func TestTerminalPhaseNeverRegresses(t *testing.T) {
	pod := newPod("p", "u1")
	pod.Status.Phase = v1.PodFailed
	client := fake.NewClientset(pod)
	m := New(Config{Client: client.CoreV1(), Pods: apiPods{client: client}})
	m.SetPodStatus(pod, running())
	m.syncAll(context.Background(), true)
	got, _ := client.CoreV1().Pods("ns").Get(context.Background(), "p", metav1.GetOptions{})
	if got.Status.Phase != v1.PodFailed {
		t.Errorf("phase regressed to %s", got.Status.Phase)
	}
}

func TestDeletedPodIsRemovedOnlyWhenTerminated(t *testing.T) {
	pod := newPod("p", "u1")
	now := metav1.Now()
	pod.DeletionTimestamp = &now
	client := fake.NewClientset(pod)
	m := New(Config{Client: client.CoreV1(), Pods: apiPods{client: client}})
	ctx := context.Background()

	final := running()
	final.Phase = v1.PodFailed
	m.SetPodStatus(pod, final)
	m.syncAll(ctx, true)
	if len(actions(client, "delete")) != 0 {
		t.Fatal("deleted before its containers stopped")
	}
	m.TerminatePod(pod)
	m.syncAll(ctx, true)
	dels := actions(client, "delete")
	if len(dels) != 1 {
		t.Fatalf("%d deletes, want 1", len(dels))
	}
	opts := dels[0].(k8stesting.DeleteActionImpl).DeleteOptions
	if opts.GracePeriodSeconds == nil || *opts.GracePeriodSeconds != 0 || opts.Preconditions == nil || *opts.Preconditions.UID != "u1" {
		t.Errorf("delete options %+v, want grace 0 and a UID precondition", opts)
	}
	// The final status went in before the delete.
	if p := actions(client, "patch"); len(p) != 1 {
		t.Errorf("%d status patches before delete, want 1", len(p))
	}
	m.syncAll(ctx, true)
	if n := len(actions(client, "delete")); n != 1 {
		t.Errorf("deleted %d times", n)
	}
}

func TestStaticPodReportsToMirrorPod(t *testing.T) {
	static := newPod("s-node", "static-uid")
	mirror := newPod("s-node", "mirror-uid")
	client := fake.NewClientset(mirror)
	m := New(Config{Client: client.CoreV1(), Pods: apiPods{client: client, mirrors: map[types.UID]string{"static-uid": "s-node"}}})
	m.SetPodStatus(static, running())
	m.syncAll(context.Background(), true)
	patches := actions(client, "patch")
	if len(patches) != 1 {
		t.Fatalf("%d patches, want 1", len(patches))
	}
	if p := string(patches[0].(k8stesting.PatchActionImpl).Patch); !strings.Contains(p, `"uid":"mirror-uid"`) {
		t.Errorf("patch must carry the mirror pod's UID as precondition: %s", p)
	}
}

func TestMissingMirrorPodIsRetriedLater(t *testing.T) {
	static := newPod("s-node", "static-uid")
	client := fake.NewClientset()
	m := New(Config{Client: client.CoreV1(), Pods: apiPods{client: client, mirrors: map[types.UID]string{"static-uid": "s-node"}}})
	m.SetPodStatus(static, running())
	m.syncAll(context.Background(), true)
	if len(actions(client, "patch")) != 0 {
		t.Fatal("patched without a mirror pod")
	}
	if _, err := client.CoreV1().Pods("ns").Create(context.Background(), newPod("s-node", "mirror-uid"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	m.syncAll(context.Background(), true)
	if len(actions(client, "patch")) != 1 {
		t.Error("status not reported once the mirror pod appeared")
	}
}

func TestStatusChangedByOthersIsReconciled(t *testing.T) {
	pod := newPod("p", "u1")
	client := fake.NewClientset(pod)
	m := New(Config{Client: client.CoreV1(), Pods: apiPods{client: client}})
	ctx := context.Background()
	m.SetPodStatus(pod, running())
	m.syncAll(ctx, true)

	// Someone else (the node lifecycle controller) marks the pod not ready.
	got, _ := client.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{})
	for i := range got.Status.Conditions {
		if got.Status.Conditions[i].Type == v1.PodReady {
			got.Status.Conditions[i].Status = v1.ConditionFalse
		}
	}
	got.ResourceVersion = "99"
	if _, err := client.CoreV1().Pods("ns").UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := len(actions(client, "patch"))
	m.syncAll(ctx, false) // a pass for new statuses only: drift waits for the periodic one
	if n := len(actions(client, "patch")); n != before {
		t.Fatalf("drift reconciled outside the periodic pass")
	}
	m.syncAll(ctx, true)
	got, _ = client.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{})
	for _, c := range got.Status.Conditions {
		if c.Type == v1.PodReady && c.Status != v1.ConditionTrue {
			t.Errorf("Ready was not restored: %+v", c)
		}
	}
	// And once restored, nothing more is sent.
	before = len(actions(client, "patch"))
	m.syncAll(ctx, true)
	if after := len(actions(client, "patch")); after != before {
		t.Errorf("%d extra patches after reconciling", after-before)
	}
}
