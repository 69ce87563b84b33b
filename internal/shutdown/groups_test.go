package shutdown

import (
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

func TestGroups(t *testing.T) {
	d := func(s int) metav1.Duration { return metav1.Duration{Duration: time.Duration(s) * time.Second} }
	byPrio := []kubeletconfigv1beta1.ShutdownGracePeriodByPodPriority{
		{Priority: 100000, ShutdownGracePeriodSeconds: 5},
		{Priority: 0, ShutdownGracePeriodSeconds: 10},
		{Priority: 2000000000, ShutdownGracePeriodSeconds: 20},
	}
	for _, tc := range []struct {
		name       string
		kc         kubeletconfigv1beta1.KubeletConfiguration
		byPriority bool
		want       []Group
	}{
		{"nothing set: off", kubeletconfigv1beta1.KubeletConfiguration{}, true, nil},
		{"grace period split into the critical share and the rest",
			kubeletconfigv1beta1.KubeletConfiguration{ShutdownGracePeriod: d(30), ShutdownGracePeriodCriticalPods: d(10)}, true,
			[]Group{{0, 20}, {2000000000, 10}}},
		{"no critical share", kubeletconfigv1beta1.KubeletConfiguration{ShutdownGracePeriod: d(30)}, true,
			[]Group{{0, 30}, {2000000000, 0}}},
		{"critical share above the total: off",
			kubeletconfigv1beta1.KubeletConfiguration{ShutdownGracePeriod: d(10), ShutdownGracePeriodCriticalPods: d(20)}, true, nil},
		{"by priority, sorted lowest first", kubeletconfigv1beta1.KubeletConfiguration{ShutdownGracePeriodByPodPriority: byPrio}, true,
			[]Group{{0, 10}, {100000, 5}, {2000000000, 20}}},
		{"by priority with its gate off: the plain periods",
			kubeletconfigv1beta1.KubeletConfiguration{ShutdownGracePeriodByPodPriority: byPrio, ShutdownGracePeriod: d(8)}, false,
			[]Group{{0, 8}, {2000000000, 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Groups(&tc.kc, tc.byPriority); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Groups = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestBudget(t *testing.T) {
	if got, want := Budget([]Group{{0, 10}, {100, 5}, {1000, 0}}), 15*time.Second; got != want {
		t.Errorf("Budget = %v, want %v", got, want)
	}
	if got := Budget(nil); got != 0 {
		t.Errorf("Budget(nil) = %v, want 0", got)
	}
}

func prioPod(name string, prio *int32, grace *int64) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PodSpec{Priority: prio, TerminationGracePeriodSeconds: grace}}
}

func TestAssign(t *testing.T) {
	groups := []Group{{-10, 1}, {0, 2}, {1000, 3}, {2000000000, 4}}
	pods := []*v1.Pod{
		prioPod("no-priority", nil, nil),
		prioPod("below-lowest", ptr.To[int32](-500), nil),
		prioPod("lowest", ptr.To[int32](-10), nil),
		prioPod("between", ptr.To[int32](999), nil),
		prioPod("boundary", ptr.To[int32](1000), nil),
		prioPod("above-boundary", ptr.To[int32](1001), nil),
		prioPod("critical", ptr.To[int32](2000000000), nil),
		prioPod("node-critical", ptr.To[int32](2000001000), nil),
	}
	want := [][]string{
		{"below-lowest", "lowest"},
		{"no-priority", "between"},
		{"boundary", "above-boundary"},
		{"critical", "node-critical"},
	}
	got := Assign(groups, pods)
	if len(got) != len(want) {
		t.Fatalf("Assign gave %d batches, want %d", len(got), len(want))
	}
	for i, b := range got {
		var names []string
		for _, p := range b.Pods {
			names = append(names, p.Name)
		}
		if b.Group != groups[i] || !reflect.DeepEqual(names, want[i]) {
			t.Errorf("batch %d = %v %v, want %v %v", i, b.Group, names, groups[i], want[i])
		}
	}
}

func TestAssignOneGroupTakesAll(t *testing.T) {
	got := Assign([]Group{{100, 7}}, []*v1.Pod{prioPod("low", nil, nil), prioPod("high", ptr.To[int32](1e9), nil)})
	if len(got) != 1 || len(got[0].Pods) != 2 {
		t.Fatalf("Assign = %+v, want one batch of both pods", got)
	}
}

func TestGracePeriod(t *testing.T) {
	b := Batch{Group: Group{Priority: 0, GracePeriodSeconds: 10}}
	for _, tc := range []struct {
		name string
		pod  *int64
		want int64
	}{
		{"pod unset: the group's", nil, 10},
		{"pod longer: the group's", ptr.To[int64](30), 10},
		{"pod shorter: the pod's", ptr.To[int64](3), 3},
		{"pod zero", ptr.To[int64](0), 0},
	} {
		if got := b.GracePeriod(prioPod("p", nil, tc.pod)); got != tc.want {
			t.Errorf("%s: GracePeriod = %d, want %d", tc.name, got, tc.want)
		}
	}
}
