package kubelet

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/skiff-sh/skiff/internal/podsource"
)

func apiPod(name, uid, rv string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(uid), ResourceVersion: rv}}
}

func staticPodOf(name, uid string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(uid),
		Annotations: map[string]string{podsource.ConfigSourceAnnotation: podsource.File}}}
}

func mirrorPod(name, uid string) *v1.Pod {
	p := apiPod(name, uid, "1")
	p.Annotations = map[string]string{podsource.ConfigMirrorAnnotation: "hash"}
	return p
}

func names(pods []*v1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func TestPodManagerReportsOnlyChanges(t *testing.T) {
	m := newPodManager()
	a, b := apiPod("a", "ua", "1"), apiPod("b", "ub", "1")
	ch := m.apply(podsource.Update{Source: podsource.APIServer, Pods: []*v1.Pod{a, b}})
	if len(ch.updated) != 2 || len(ch.removed) != 0 {
		t.Fatalf("first snapshot: %+v", ch)
	}
	// Same objects again, and b at a new resourceVersion: only b changed.
	ch = m.apply(podsource.Update{Source: podsource.APIServer, Pods: []*v1.Pod{a, apiPod("b", "ub", "2")}})
	if got := names(ch.updated); len(got) != 1 || got[0] != "b" {
		t.Errorf("updated %v, want [b]", got)
	}
	ch = m.apply(podsource.Update{Source: podsource.APIServer, Pods: []*v1.Pod{a}})
	if got := names(ch.removed); len(got) != 1 || got[0] != "b" || len(ch.updated) != 0 {
		t.Errorf("removed %v updated %v", got, names(ch.updated))
	}
	// Pods without resourceVersion (static pods) compare by content.
	s := staticPodOf("s", "us")
	m.apply(podsource.Update{Source: podsource.File, Pods: []*v1.Pod{s}})
	if ch := m.apply(podsource.Update{Source: podsource.File, Pods: []*v1.Pod{s.DeepCopy()}}); len(ch.updated) != 0 {
		t.Errorf("an identical static pod counted as changed")
	}
	s2 := s.DeepCopy()
	s2.Labels = map[string]string{"x": "y"}
	if ch := m.apply(podsource.Update{Source: podsource.File, Pods: []*v1.Pod{s2}}); len(ch.updated) != 1 {
		t.Errorf("a changed static pod was missed")
	}
}

func TestPodManagerKeepsMirrorPodsApart(t *testing.T) {
	m := newPodManager()
	if m.ready([]string{podsource.File, podsource.APIServer}) {
		t.Fatal("ready before any source spoke")
	}
	static := staticPodOf("s-node", "static")
	m.apply(podsource.Update{Source: podsource.File, Pods: []*v1.Pod{static}})
	ch := m.apply(podsource.Update{Source: podsource.APIServer, Pods: []*v1.Pod{mirrorPod("s-node", "mirror"), mirrorPod("gone-node", "m2")}})
	if len(ch.updated) != 0 || len(ch.mirrors) != 2 {
		t.Errorf("mirror pods must not be run: updated %v mirrors %v", names(ch.updated), ch.mirrors)
	}
	if !m.ready([]string{podsource.File, podsource.APIServer}) {
		t.Error("not ready after both sources spoke")
	}
	if mp, ok := m.mirrorOf(static); !ok || mp.UID != "mirror" {
		t.Errorf("mirrorOf = %v, %v", mp, ok)
	}
	if _, ok := m.get("mirror"); ok {
		t.Error("a mirror pod is listed as a wanted pod")
	}
	if got := names(m.orphanedMirrors()); len(got) != 1 || got[0] != "gone-node" {
		t.Errorf("orphaned mirrors %v, want [gone-node]", got)
	}
	// The mirror pod going away is reported too.
	ch = m.apply(podsource.Update{Source: podsource.APIServer, Pods: nil})
	if len(ch.mirrors) != 2 {
		t.Errorf("mirror removals reported: %v", ch.mirrors)
	}
	if len(m.pods()) != 1 {
		t.Errorf("pods() = %v, want only the static pod", names(m.pods()))
	}
}
