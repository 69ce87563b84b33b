package resize

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func rr(cpuReq, memReq, cpuLim, memLim string) v1.ResourceRequirements {
	list := func(cpu, mem string) v1.ResourceList {
		l := v1.ResourceList{}
		if cpu != "" {
			l[v1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			l[v1.ResourceMemory] = resource.MustParse(mem)
		}
		return l
	}
	return v1.ResourceRequirements{Requests: list(cpuReq, memReq), Limits: list(cpuLim, memLim)}
}

func pod(uid string, r ...v1.ResourceRequirements) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "ns", UID: types.UID(uid), Generation: 1}}
	for i, res := range r {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: string(rune('a' + i)), Resources: res})
	}
	return p
}

func TestCheck(t *testing.T) {
	alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("1Gi"),
		v1.ResourcePods: resource.MustParse("110")}
	other := pod("other", rr("1500m", "256Mi", "", ""))
	for _, tc := range []struct {
		name        string
		desired     *v1.Pod
		others      []*v1.Pod
		static      bool
		alloc       v1.ResourceList
		reason, msg string
	}{
		{"fits", pod("p", rr("500m", "128Mi", "", "")), []*v1.Pod{other}, false, alloc, "", ""},
		{"own allocation is not counted twice", pod("p", rr("500m", "128Mi", "", "")), []*v1.Pod{other, pod("p", rr("1", "", "", ""))}, false, alloc, "", ""},
		{"cpu over what is left", pod("p", rr("1", "128Mi", "", "")), []*v1.Pod{other}, false, alloc,
			ReasonDeferred, "Node didn't have enough resource: cpu, requested: 1000, used: 1500, capacity: 2000"},
		{"cpu over allocatable", pod("p", rr("3", "", "", "")), nil, false, alloc,
			ReasonInfeasible, "Node didn't have enough capacity: cpu, requested: 3000, capacity: 2000"},
		{"memory first when both are over", pod("p", rr("3", "2Gi", "", "")), nil, false, alloc,
			ReasonInfeasible, "Node didn't have enough capacity: memory, requested: 2147483648, capacity: 1073741824"},
		{"static pod", pod("p", rr("100m", "", "", "")), nil, true, alloc, ReasonInfeasible, "In-place resize of static-pods is not supported"},
		{"no node known", pod("p", rr("30", "", "", "")), nil, false, nil, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reason, msg := Check(tc.desired, tc.others, tc.alloc, tc.static)
			if reason != tc.reason || msg != tc.msg {
				t.Errorf("got %q %q, want %q %q", reason, msg, tc.reason, tc.msg)
			}
		})
	}
}

func TestWithAllocation(t *testing.T) {
	p := pod("p", rr("1", "", "", ""), rr("200m", "", "", ""))
	p.Spec.InitContainers = []v1.Container{
		{Name: "init", Resources: rr("2", "", "", "")},
		{Name: "side", Resources: rr("300m", "", "", ""), RestartPolicy: ptrTo(v1.ContainerRestartPolicyAlways)},
	}
	a := AllocationOf(p)
	if _, ok := a["init"]; ok || len(a) != 3 {
		t.Fatalf("allocation %v: want the app containers and the sidecar, not the init container", a)
	}
	if same, differs := WithAllocation(p, a); differs || same != p {
		t.Error("the spec's own allocation differs")
	}
	a["side"] = rr("100m", "", "", "")
	got, differs := WithAllocation(p, a)
	if !differs || got == p {
		t.Fatal("a changed allocation does not differ, or the pod was not copied")
	}
	if q := got.Spec.InitContainers[1].Resources.Requests.Cpu(); q.MilliValue() != 100 {
		t.Errorf("sidecar as allocated: %s", q)
	}
	if q := p.Spec.InitContainers[1].Resources.Requests.Cpu(); q.MilliValue() != 300 {
		t.Errorf("the desired pod was changed: %s", q)
	}
}

func TestPlan(t *testing.T) {
	restartMem := []v1.ContainerResizePolicy{{ResourceName: v1.ResourceMemory, RestartPolicy: v1.RestartContainer}}
	for _, tc := range []struct {
		name     string
		alloc    v1.ResourceRequirements
		policy   []v1.ContainerResizePolicy
		actuated v1.ResourceRequirements
		want     Change
	}{
		{"same", rr("1", "1Gi", "2", "1Gi"), nil, rr("1000m", "1024Mi", "2", "1Gi"), Change{}},
		{"cpu", rr("1", "1Gi", "2", "1Gi"), nil, rr("500m", "1Gi", "2", "1Gi"), Change{CPU: true}},
		{"memory limit", rr("1", "1Gi", "2", "2Gi"), nil, rr("1", "1Gi", "2", "1Gi"), Change{Memory: true}},
		{"memory with RestartContainer", rr("1", "1Gi", "2", "2Gi"), restartMem, rr("1", "1Gi", "2", "1Gi"), Change{Restart: true}},
		{"cpu only, memory policy RestartContainer", rr("2", "1Gi", "2", "1Gi"), restartMem, rr("1", "1Gi", "2", "1Gi"), Change{CPU: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &v1.Container{Name: "c", Resources: tc.alloc, ResizePolicy: tc.policy}
			if got := Plan(c, tc.actuated); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestBefore(t *testing.T) {
	now := time.Now()
	prio := func(p *v1.Pod, n int32) *v1.Pod { p.Spec.Priority = &n; return p }
	guaranteed := pod("g", rr("1", "1Gi", "1", "1Gi"))
	burstable := pod("b", rr("1", "1Gi", "", ""))
	for _, tc := range []struct {
		name  string
		first Waiting
		then  Waiting
	}{
		{"not increasing first", Waiting{Pod: prio(pod("x", rr("1", "", "", "")), 0)}, Waiting{Pod: prio(pod("y", rr("1", "", "", "")), 100), Increasing: true}},
		{"higher priority", Waiting{Pod: prio(pod("x", rr("1", "", "", "")), 10), Increasing: true}, Waiting{Pod: prio(pod("y", rr("1", "", "", "")), 1), Increasing: true}},
		{"guaranteed before burstable", Waiting{Pod: guaranteed, Increasing: true, Since: now}, Waiting{Pod: burstable, Increasing: true, Since: now.Add(-time.Hour)}},
		{"longest pending", Waiting{Pod: pod("x", rr("1", "", "", "")), Increasing: true, Since: now.Add(-time.Minute)}, Waiting{Pod: pod("y", rr("1", "", "", "")), Increasing: true, Since: now}},
		{"pending before never pending", Waiting{Pod: pod("x", rr("1", "", "", "")), Increasing: true, Since: now}, Waiting{Pod: pod("y", rr("1", "", "", "")), Increasing: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !Before(tc.first, tc.then) || Before(tc.then, tc.first) {
				t.Errorf("Before(first, then)=%v Before(then, first)=%v", Before(tc.first, tc.then), Before(tc.then, tc.first))
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }
