package status

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Store keeps the latest computed status of every pod.
type Store struct {
	mu sync.RWMutex
	m  map[types.UID]v1.PodStatus
}

// NewStore returns an empty Store.
func NewStore() *Store { return &Store{m: map[types.UID]v1.PodStatus{}} }

// Get returns a pod's status; ok is false when none was computed yet.
func (s *Store) Get(uid types.UID) (st v1.PodStatus, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st, ok = s.m[uid]
	return st, ok
}

// Set records a pod's status.
func (s *Store) Set(uid types.UID, st v1.PodStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[uid] = st
}

// Delete forgets a pod.
func (s *Store) Delete(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, uid)
}
