package kubelet

import (
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/skiff-sh/skiff/internal/podsource"
)

// podManager holds the pods the sources want, by source.
type podManager struct {
	mu       sync.RWMutex
	bySource map[string]map[types.UID]*v1.Pod
}

func newPodManager() *podManager {
	return &podManager{bySource: map[string]map[types.UID]*v1.Pod{}}
}

// apply records a source's snapshot and returns the pods it added or
// changed and those it no longer wants.
func (m *podManager) apply(u podsource.Update) (updated, removed []*v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.bySource[u.Source]
	next := make(map[types.UID]*v1.Pod, len(u.Pods))
	for _, p := range u.Pods {
		next[p.UID] = p
		updated = append(updated, p)
	}
	for uid, p := range old {
		if _, ok := next[uid]; !ok {
			removed = append(removed, p)
		}
	}
	m.bySource[u.Source] = next
	return updated, removed
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
