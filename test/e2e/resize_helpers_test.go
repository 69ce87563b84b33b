//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// res is a container's resources: CPU and memory requests, then limits;
// "" leaves one out.
func res(cpuReq, memReq, cpuLim, memLim string) v1.ResourceRequirements {
	list := func(cpu, mem string) v1.ResourceList {
		l := v1.ResourceList{}
		if cpu != "" {
			l[v1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			l[v1.ResourceMemory] = resource.MustParse(mem)
		}
		if len(l) == 0 {
			return nil
		}
		return l
	}
	return v1.ResourceRequirements{Requests: list(cpuReq, memReq), Limits: list(cpuLim, memLim)}
}

// resize asks for new resources of containers (by name) through the
// pod's resize subresource, as `kubectl patch --subresource resize` does,
// and returns the pod's new generation.
func (cn *clusterNode) resize(t *testing.T, name string, init bool, want map[string]v1.ResourceRequirements) int64 {
	t.Helper()
	type ctr struct {
		Name      string                  `json:"name"`
		Resources v1.ResourceRequirements `json:"resources"`
	}
	// In the spec's order: a strategic merge patch that lists them in
	// another order reorders them, which a resize may not.
	spec := cn.getPod(t, name).Spec.Containers
	key := "containers"
	if init {
		spec, key = cn.getPod(t, name).Spec.InitContainers, "initContainers"
	}
	var list []ctr
	for _, c := range spec {
		if r, ok := want[c.Name]; ok {
			list = append(list, ctr{c.Name, r})
		}
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{key: list}})
	must(t, err)
	p, err := cn.admin.CoreV1().Pods(cn.ns).Patch(cn.ctx(), name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "resize")
	if err != nil {
		t.Fatalf("resize %s: %v", name, err)
	}
	return p.Generation
}

// resizeCondition returns the pod's condition of that type, or nil.
func resizeCondition(p *v1.Pod, t v1.PodConditionType) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// statusOf returns the named container's status, init containers too.
func statusOf(p *v1.Pod, name string) *v1.ContainerStatus {
	for _, l := range [][]v1.ContainerStatus{p.Status.ContainerStatuses, p.Status.InitContainerStatuses} {
		for i := range l {
			if l[i].Name == name {
				return &l[i]
			}
		}
	}
	return nil
}

// sameResources compares resource lists by value.
func sameResources(a, b v1.ResourceRequirements) bool {
	eq := func(x, y v1.ResourceList) bool {
		if len(x) != len(y) {
			return false
		}
		for k, q := range x {
			if r, ok := y[k]; !ok || q.Cmp(r) != 0 {
				return false
			}
		}
		return true
	}
	return eq(a.Requests, b.Requests) && eq(a.Limits, b.Limits)
}

// waitResized waits until the node reports the resize of generation gen
// done: observed, no resize condition left, and every named container's
// status resources as wanted. Both containerds report a container's
// resources as updated; a runtime that reports none leaves the values
// shown before, as upstream, so then only their presence is checked.
func (cn *clusterNode) waitResized(t *testing.T, name string, gen int64, want map[string]v1.ResourceRequirements) *v1.Pod {
	t.Helper()
	var last string // what differed at the last look, shown if it never ends
	defer func() {
		if t.Failed() {
			t.Logf("at the last look: %s", last)
		}
	}()
	return cn.waitPod(t, cn.ns, name, 60*time.Second, fmt.Sprintf("resize of generation %d done", gen), func(p *v1.Pod) bool {
		last = fmt.Sprintf("observedGeneration %d, conditions %+v", p.Status.ObservedGeneration, p.Status.Conditions)
		if p.Status.ObservedGeneration < gen || resizeCondition(p, v1.PodResizePending) != nil || resizeCondition(p, v1.PodResizeInProgress) != nil {
			return false
		}
		for n, r := range want {
			cs := statusOf(p, n)
			if cs == nil || cs.Resources == nil {
				last = fmt.Sprintf("container %s has no status resources", n)
				return false
			}
			if rt := cn.runtimeResources(t, cs.ContainerID); rt != nil && !sameResources(*cs.Resources, r) {
				last = fmt.Sprintf("container %s: the runtime reports %v; status resources %v, want %v", n, rt, *cs.Resources, r)
				return false
			}
		}
		return true
	})
}

// runtimeResources is what the node's runtime reports of a container's
// resources in its CRI status; nil when it reports none.
func (cn *clusterNode) runtimeResources(t *testing.T, id string) *runtimeapi.LinuxContainerResources {
	t.Helper()
	resp, err := cn.runtime().ContainerStatus(cn.ctx(), strings.TrimPrefix(id, "containerd://"), false)
	if err != nil {
		return nil
	}
	return resp.GetStatus().GetResources().GetLinux()
}

// containerCgroup is a running container's cgroup (cgroupfs driver)
// below the node's cgroupRoot, and its pod's.
func containerCgroup(cgroupRoot string, p *v1.Pod, name string) (pod, ctr string) {
	qos := strings.ToLower(string(p.Status.QOSClass))
	pod = filepath.Join(cgroupRoot, "kubepods", qos, "pod"+string(p.UID))
	if p.Status.QOSClass == v1.PodQOSGuaranteed {
		pod = filepath.Join(cgroupRoot, "kubepods", "pod"+string(p.UID))
	}
	id := strings.TrimPrefix(statusOf(p, name).ContainerID, "containerd://")
	return pod, filepath.Join(pod, id)
}

// cgroupLimits are the CPU and memory settings a cgroup has.
type cgroupLimits struct{ shares, quota, memory string }

func readCgroupLimits(t *testing.T, cg string) cgroupLimits {
	t.Helper()
	return cgroupLimits{
		shares: cgroupFile(t, "cpu", cg, "cpu.shares"),
		quota:  cgroupFile(t, "cpu", cg, "cpu.cfs_quota_us"),
		memory: cgroupFile(t, "memory", cg, "memory.limit_in_bytes"),
	}
}

// checkCgroups compares a cgroup's settings with the wanted ones.
func checkCgroups(t *testing.T, what, cg string, want cgroupLimits) {
	t.Helper()
	if got := readCgroupLimits(t, cg); got != want {
		t.Errorf("%s cgroup %s: shares/quota/memory %+v, want %+v", what, cg, got, want)
	}
}
