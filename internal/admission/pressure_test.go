package admission

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPressure(t *testing.T) {
	bestEffort := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "be"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}
	burstable := bestEffort.DeepCopy()
	burstable.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse("10Mi")}
	tolerating := bestEffort.DeepCopy()
	tolerating.Spec.Tolerations = []v1.Toleration{{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
	static := bestEffort.DeepCopy()
	static.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
	memory := []v1.NodeConditionType{v1.NodeMemoryPressure}
	disk := []v1.NodeConditionType{v1.NodeDiskPressure}
	for _, tc := range []struct {
		name  string
		conds []v1.NodeConditionType
		pod   *v1.Pod
		admit bool
	}{
		{"no pressure", nil, bestEffort, true},
		{"memory, BestEffort", memory, bestEffort, false},
		{"memory, Burstable", memory, burstable, true},
		{"memory, BestEffort tolerating the taint", memory, tolerating, true},
		{"disk, Burstable", disk, burstable, false},
		{"memory and disk, tolerating memory", append(memory, disk...), tolerating, false},
		{"disk, static", disk, static, true},
	} {
		r := Pressure(tc.conds, tc.pod)
		if r.Admit != tc.admit {
			t.Errorf("%s: admit %v, want %v", tc.name, r.Admit, tc.admit)
		}
		if !r.Admit && (r.Reason != "Evicted" || r.Message != "The node had condition: "+fmtConds(tc.conds)+". ") {
			t.Errorf("%s: reason %q message %q", tc.name, r.Reason, r.Message)
		}
	}
}

func fmtConds(c []v1.NodeConditionType) string {
	s := "["
	for i, x := range c {
		if i > 0 {
			s += " "
		}
		s += string(x)
	}
	return s + "]"
}
