package admission

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node() *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"disk": "ssd", "kubernetes.io/hostname": "n1"}},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{
			v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("1Gi"), v1.ResourcePods: resource.MustParse("3"),
		}},
	}
}

func pod(cpu, mem string) *v1.Pod {
	req := v1.ResourceList{}
	if cpu != "" {
		req[v1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		req[v1.ResourceMemory] = resource.MustParse(mem)
	}
	return &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: req}}}}}
}

func TestAdmit(t *testing.T) {
	cases := []struct {
		name   string
		pod    *v1.Pod
		active []*v1.Pod
		reason string
		msg    string
	}{
		{"fits", pod("1", "512Mi"), nil, "", ""},
		{"best effort fits", pod("", ""), []*v1.Pod{pod("2", "1Gi")}, "", ""},
		{"too much cpu", pod("3", ""), nil, "OutOfcpu", "cpu, requested: 3000, used: 0, capacity: 2000"},
		{"cpu used by others", pod("1500m", ""), []*v1.Pod{pod("1", "")}, "OutOfcpu", "requested: 1500, used: 1000, capacity: 2000"},
		{"too much memory", pod("", "2Gi"), nil, "OutOfmemory", "memory, requested: 2147483648"},
		{"too many pods", pod("", ""), []*v1.Pod{pod("", ""), pod("", ""), pod("", "")}, "OutOfpods", "pods, requested: 1, used: 3, capacity: 3"},
	}
	for _, c := range cases {
		r := Admit(node(), c.pod, c.active)
		if r.Admit != (c.reason == "") || r.Reason != c.reason || !strings.Contains(r.Message, c.msg) {
			t.Errorf("%s: got %+v, want reason %q with %q", c.name, r, c.reason, c.msg)
		}
	}
}

func TestAdmitNodeSelectorAndAffinity(t *testing.T) {
	p := pod("", "")
	p.Spec.NodeSelector = map[string]string{"disk": "hdd"}
	if r := Admit(node(), p, nil); r.Admit || r.Reason != "NodeAffinity" {
		t.Errorf("node selector mismatch admitted: %+v", r)
	}
	p.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	if r := Admit(node(), p, nil); !r.Admit {
		t.Errorf("matching node selector rejected: %+v", r)
	}
	p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
		NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{
			Key: "kubernetes.io/hostname", Operator: v1.NodeSelectorOpIn, Values: []string{"other"},
		}}}},
	}}}
	if r := Admit(node(), p, nil); r.Admit || r.Reason != "NodeAffinity" {
		t.Errorf("affinity mismatch admitted: %+v", r)
	}
}
