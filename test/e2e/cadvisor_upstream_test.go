//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The same pod on the shared Skiff and on an upstream kubelet v1.34 of
// the test's own (on a private containerd, joined to the suite cluster):
// /metrics/cadvisor through the node proxy gives the pod the same
// families, with the same types, help texts and label names, and the
// machine series are the same families too.
func TestCadvisorFamiliesMatchUpstreamKubelet(t *testing.T) {
	cn := sharedNode(t)
	up := startUpstreamNode(t, cn.c, "")

	ours := cn.createPod(t, cadvisorPod("cadvisor-skiff"))
	theirs := up.createPod(t, cadvisorPod("cadvisor-upstream"))
	cn.waitPod(t, cn.ns, ours.Name, 90*time.Second, "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	up.waitPod(t, up.ns, theirs.Name, 90*time.Second, "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })

	var skiff, upstream map[string]string
	waitFor(t, 60*time.Second, "both kubelets' series of their pod", func() (bool, error) {
		skiff = podFamilies(parseScrape(t, cn.proxyGetNode(t, cn.hostname(), "metrics/cadvisor")), cn.ns, ours.Name)
		upstream = podFamilies(parseScrape(t, cn.proxyGetNode(t, up.hostname(), "metrics/cadvisor")), up.ns, theirs.Name)
		// cAdvisor finds a new container on its next housekeeping.
		return hasSeries(skiff, "container") && hasSeries(upstream, "container"), nil
	})
	names := map[string]bool{}
	for n := range skiff {
		names[n] = true
	}
	for n := range upstream {
		names[n] = true
	}
	var diffs []string
	for n := range names {
		s, u := skiff[n], upstream[n]
		if s == u || cadvisorOptional[n] && (s == "" || u == "") {
			continue
		}
		diffs = append(diffs, fmt.Sprintf("%s\n  skiff    %q\n  upstream %q", n, s, u))
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		t.Errorf("families differ from the upstream kubelet's:\n%s", strings.Join(diffs, "\n"))
	}
	t.Logf("%d families compared", len(names))
}

func cadvisorPod(name string) *v1.Pod {
	p := busyboxPod(name, "while :; do sleep 1; done")
	p.Spec.Containers[0].Resources.Limits = v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("48Mi")}
	return p
}

// podFamilies is the families of a scrape restricted to the pod's series
// (the machine's and the scrape's own families whole), by name, as
// signature lines; a "kinds" entry notes which of the pod's cgroups
// (pod, sandbox, container) have series.
func podFamilies(mfs map[string]*dto.MetricFamily, ns, pod string) map[string]string {
	out := map[string]string{}
	kinds := map[string]bool{}
	for name, mf := range mfs {
		keep := &dto.MetricFamily{Name: mf.Name, Help: mf.Help, Type: mf.Type}
		for _, m := range mf.GetMetric() {
			l := labelsOf(m)
			if _, perContainer := l["pod"]; perContainer && (l["pod"] != pod || l["namespace"] != ns) {
				continue
			}
			if _, ok := l["pod"]; ok {
				switch {
				case l["container"] != "":
					kinds["container"] = true
				case l["image"] != "":
					kinds["sandbox"] = true
				default:
					kinds["pod"] = true
				}
			}
			keep.Metric = append(keep.Metric, m)
		}
		if len(keep.Metric) > 0 {
			out[name] = signature(keep)
		}
	}
	var k []string
	for kind := range kinds {
		k = append(k, kind)
	}
	sort.Strings(k)
	out["kinds"] = strings.Join(k, ",")
	return out
}

func hasSeries(families map[string]string, kind string) bool {
	return strings.Contains(families["kinds"], kind)
}

// proxyGetNode gets a kubelet path of the named node through the
// apiserver's node proxy.
func (cn *clusterNode) proxyGetNode(t *testing.T, node, p string) []byte {
	t.Helper()
	b, err := cn.admin.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy", p).DoRaw(cn.ctx())
	must(t, err)
	return b
}

// makeCgroupRoot makes the cgroup root in every v1 hierarchy, or in the
// unified one on a v2 host.
func makeCgroupRoot(t *testing.T, root string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(cgroupMount, "cgroup.controllers")); err == nil {
		must(t, os.MkdirAll(filepath.Join(cgroupMount, root), 0o755))
		return
	}
	entries, err := os.ReadDir(cgroupMount)
	must(t, err)
	for _, e := range entries {
		if e.IsDir() {
			must(t, os.MkdirAll(filepath.Join(cgroupMount, e.Name(), root), 0o755))
		}
	}
}
