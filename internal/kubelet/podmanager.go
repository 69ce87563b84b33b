package kubelet

import (
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	"github.com/skiff-sh/skiff/internal/podsource"
)

// podManager holds the pods the sources want, by source, and the mirror
// pods the apiserver holds for static pods, by full name. Mirror pods are
// never run: they only show static pods to the cluster.
type podManager struct {
	mu       sync.RWMutex
	bySource map[string]map[types.UID]*v1.Pod
	mirrors  map[string]*v1.Pod // by namespace/name
}

// change is what one source update means for the pods.
type change struct {
	updated []*v1.Pod // new or changed pods
	removed []*v1.Pod // pods the source no longer wants
	mirrors []string  // full names whose mirror pod appeared, changed or went
}

func newPodManager() *podManager {
	return &podManager{bySource: map[string]map[types.UID]*v1.Pod{}, mirrors: map[string]*v1.Pod{}}
}

// IsMirrorPod reports whether the pod is a mirror pod of a static pod.
func IsMirrorPod(p *v1.Pod) bool {
	_, ok := p.Annotations[podsource.ConfigMirrorAnnotation]
	return ok
}

// IsStaticPod reports whether the pod comes from a source other than the
// apiserver.
func IsStaticPod(p *v1.Pod) bool {
	s := p.Annotations[podsource.ConfigSourceAnnotation]
	return s != "" && s != podsource.APIServer
}

func fullName(p *v1.Pod) string { return p.Namespace + "/" + p.Name }

// apply records a source's snapshot and returns what changed.
func (m *podManager) apply(u podsource.Update) change {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ch change
	old := m.bySource[u.Source]
	next := make(map[types.UID]*v1.Pod, len(u.Pods))
	var mirrors map[string]*v1.Pod
	if u.Source == podsource.APIServer {
		mirrors = map[string]*v1.Pod{}
	}
	for _, p := range u.Pods {
		if mirrors != nil && IsMirrorPod(p) {
			mirrors[fullName(p)] = p
			continue
		}
		next[p.UID] = p
		if prev, ok := old[p.UID]; !ok || changed(prev, p) {
			ch.updated = append(ch.updated, p)
		}
	}
	for uid, p := range old {
		if _, ok := next[uid]; !ok {
			ch.removed = append(ch.removed, p)
		}
	}
	m.bySource[u.Source] = next
	if mirrors != nil {
		for name, p := range mirrors {
			if prev, ok := m.mirrors[name]; !ok || changed(prev, p) {
				ch.mirrors = append(ch.mirrors, name)
			}
		}
		for name := range m.mirrors {
			if _, ok := mirrors[name]; !ok {
				ch.mirrors = append(ch.mirrors, name)
			}
		}
		m.mirrors = mirrors
	}
	return ch
}

// changed compares two versions of a pod: by resourceVersion when the
// apiserver set one, else by content.
func changed(a, b *v1.Pod) bool {
	if a.ResourceVersion != "" || b.ResourceVersion != "" {
		return a.ResourceVersion != b.ResourceVersion
	}
	return !equality.Semantic.DeepEqual(a, b)
}

// ready reports whether every named source has sent its first snapshot.
func (m *podManager) ready(sources []string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, s := range sources {
		if _, ok := m.bySource[s]; !ok {
			return false
		}
	}
	return true
}

func (m *podManager) get(uid types.UID) (*v1.Pod, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, pods := range m.bySource {
		if p, ok := pods[uid]; ok {
			return p, true
		}
	}
	return nil, false
}

// byFullName returns the wanted (non-mirror) pod of that namespace/name.
func (m *podManager) byFullName(name string) (*v1.Pod, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, pods := range m.bySource {
		for _, p := range pods {
			if fullName(p) == name {
				return p, true
			}
		}
	}
	return nil, false
}

// mirrorOf returns the mirror pod of a static pod.
func (m *podManager) mirrorOf(p *v1.Pod) (*v1.Pod, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	mp, ok := m.mirrors[fullName(p)]
	return mp, ok
}

// orphanedMirrors returns mirror pods whose static pod is gone.
func (m *podManager) orphanedMirrors() []*v1.Pod {
	m.mu.RLock()
	defer m.mu.RUnlock()
	static := map[string]bool{}
	for src, pods := range m.bySource {
		if src == podsource.APIServer {
			continue
		}
		for _, p := range pods {
			static[fullName(p)] = true
		}
	}
	var out []*v1.Pod
	for name, mp := range m.mirrors {
		if !static[name] {
			out = append(out, mp)
		}
	}
	return out
}

// pods returns every wanted pod, sorted by namespace and name.
func (m *podManager) pods() []*v1.Pod {
	m.mu.RLock()
	var out []*v1.Pod
	for _, pods := range m.bySource {
		for _, p := range pods {
			out = append(out, p)
		}
	}
	m.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}
