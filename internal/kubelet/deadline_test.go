package kubelet

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/skiff-sh/skiff/internal/statusmanager"
)

type fakeRecorder struct{ events []string }

func (r *fakeRecorder) Eventf(_ runtime.Object, eventtype, reason, format string, args ...interface{}) {
	r.events = append(r.events, eventtype+" "+reason+" "+fmt.Sprintf(format, args...))
}

func TestActiveDeadline(t *testing.T) {
	now := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	pod := func(uid string, deadline int64, phase v1.PodPhase, startedAgo time.Duration) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "ns", UID: types.UID(uid)}}
		if deadline > 0 {
			p.Spec.ActiveDeadlineSeconds = &deadline
		}
		p.Status.Phase = phase
		if startedAgo > 0 {
			p.Status.StartTime = &metav1.Time{Time: now.Add(-startedAgo)}
		}
		return p
	}
	for _, tc := range []struct {
		name   string
		pod    *v1.Pod
		known  *v1.PodStatus // what Skiff computed last
		left   time.Duration
		failed bool
	}{
		{name: "no deadline", pod: pod("a", 0, v1.PodRunning, time.Hour)},
		{name: "not started yet", pod: pod("b", 30, v1.PodPending, 0), left: 30 * time.Second},
		{name: "within", pod: pod("c", 30, v1.PodRunning, 10*time.Second), left: 20 * time.Second},
		{name: "past, from the apiserver's start time", pod: pod("d", 30, v1.PodRunning, 31*time.Second), failed: true},
		{name: "exactly at it", pod: pod("e", 30, v1.PodRunning, 30*time.Second), failed: true},
		{name: "Skiff's own start time wins", pod: pod("f", 30, v1.PodRunning, 0),
			known: &v1.PodStatus{Phase: v1.PodRunning, StartTime: &metav1.Time{Time: now.Add(-time.Minute)}}, failed: true},
		{name: "a finished pod stays as it is", pod: pod("g", 30, v1.PodSucceeded, time.Hour)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &fakeRecorder{}
			k := &Kubelet{statuses: statusmanager.New(statusmanager.Config{}), records: newPodRecords(), recorder: rec}
			if tc.known != nil {
				k.statuses.SetPodStatus(tc.pod, *tc.known)
			}
			if left := k.checkActiveDeadline(tc.pod, now); left != tc.left {
				t.Errorf("left %v, want %v", left, tc.left)
			}
			k.checkActiveDeadline(tc.pod, now.Add(time.Millisecond)) // once is enough
			if !tc.failed {
				if k.records.get(tc.pod.UID).failure != nil || len(rec.events) > 0 {
					t.Errorf("failed %+v, events %q", k.records.get(tc.pod.UID).failure, rec.events)
				}
				return
			}
			want := "Normal DeadlineExceeded Pod was active on the node longer than the specified deadline"
			if len(rec.events) != 1 || rec.events[0] != want {
				t.Errorf("events %q, want one %q", rec.events, want)
			}
			s := v1.PodStatus{Phase: v1.PodRunning}
			applyFailure(k.records.get(tc.pod.UID).failure, &s)
			if s.Phase != v1.PodFailed || s.Reason != "DeadlineExceeded" || s.Message != "Pod was active on the node longer than the specified deadline" || len(s.Conditions) != 0 {
				t.Errorf("status %+v, want Failed/DeadlineExceeded without DisruptionTarget", s)
			}
		})
	}
}
