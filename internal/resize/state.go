package resize

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	"github.com/skiff-sh/skiff/internal/atomicfile"
)

// The checkpoint files, in the root directory, named as upstream's.
const (
	allocatedFile = "allocated_pods_state"
	actuatedFile  = "actuated_pods_state"
)

// Allocation is the resources of a pod's resizable containers, by name.
type Allocation map[string]v1.ResourceRequirements

// checkpoint is one file's content.
type checkpoint struct {
	Version int                      `json:"version"`
	Pods    map[types.UID]Allocation `json:"pods"`
}

// Store keeps, per pod, the resources allocated to its containers (what
// Skiff accepted) and those actuated (what the runtime was last told),
// each in a file of its own, so a restarted Skiff neither loses a resize
// nor applies it twice. With no directory it keeps them in memory.
type Store struct {
	dir string

	mu        sync.Mutex
	allocated map[types.UID]Allocation
	actuated  map[types.UID]Allocation
}

// Open reads the checkpoints in dir ("" keeps nothing on disk). A file
// that cannot be read fails: starting without it could apply a resize
// twice or undo one.
func Open(dir string) (*Store, error) {
	s := &Store{dir: dir, allocated: map[types.UID]Allocation{}, actuated: map[types.UID]Allocation{}}
	if dir == "" {
		return s, nil
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("resize checkpoint directory: %w", err)
	}
	var err error
	if s.allocated, err = read(filepath.Join(dir, allocatedFile)); err != nil {
		return nil, err
	}
	if s.actuated, err = read(filepath.Join(dir, actuatedFile)); err != nil {
		return nil, err
	}
	return s, nil
}

func read(path string) (map[types.UID]Allocation, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[types.UID]Allocation{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read resize checkpoint: %w", err)
	}
	var c checkpoint
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("resize checkpoint %s is corrupt: %w", path, err)
	}
	if c.Pods == nil {
		c.Pods = map[types.UID]Allocation{}
	}
	return c.Pods, nil
}

// write replaces a checkpoint file atomically: a crash leaves the old
// file or the new one, never half of one.
func (s *Store) write(name string, pods map[types.UID]Allocation) error {
	if s.dir == "" {
		return nil
	}
	b, err := json.Marshal(checkpoint{Version: 1, Pods: pods})
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(s.dir, name), b, 0o600); err != nil {
		return fmt.Errorf("write resize checkpoint %s: %w", name, err)
	}
	return nil
}

// Allocated returns the pod's allocation, if it has one.
func (s *Store) Allocated(uid types.UID) (Allocation, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.allocated[uid]
	return a.clone(), ok
}

// SetAllocated records the pod's allocation.
func (s *Store) SetAllocated(uid types.UID, a Allocation) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.allocated[uid]; ok && equality.Semantic.DeepEqual(old, a) {
		return nil
	}
	s.allocated[uid] = a.clone()
	return s.write(allocatedFile, s.allocated)
}

// Actuated returns what the runtime was last told a container gets.
func (s *Store) Actuated(uid types.UID, name string) (v1.ResourceRequirements, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.actuated[uid][name]
	return *r.DeepCopy(), ok
}

// SetActuated records what the runtime was told a container gets.
func (s *Store) SetActuated(uid types.UID, name string, r v1.ResourceRequirements) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.actuated[uid][name]; ok && equality.Semantic.DeepEqual(old, r) {
		return nil
	}
	if s.actuated[uid] == nil {
		s.actuated[uid] = Allocation{}
	}
	s.actuated[uid][name] = *r.DeepCopy()
	return s.write(actuatedFile, s.actuated)
}

// Remove forgets a pod.
func (s *Store) Remove(uid types.UID) error {
	return s.Retain(func(u types.UID) bool { return u != uid })
}

// Retain forgets every pod that keep refuses.
func (s *Store) Retain(keep func(types.UID) bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for name, m := range map[string]map[types.UID]Allocation{allocatedFile: s.allocated, actuatedFile: s.actuated} {
		dropped := false
		for uid := range m {
			if !keep(uid) {
				delete(m, uid)
				dropped = true
			}
		}
		if dropped {
			errs = append(errs, s.write(name, m))
		}
	}
	return errors.Join(errs...)
}

// Pods lists the pods with an allocation.
func (s *Store) Pods() []types.UID {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]types.UID, 0, len(s.allocated))
	for uid := range s.allocated {
		out = append(out, uid)
	}
	return out
}

func (a Allocation) clone() Allocation {
	if a == nil {
		return nil
	}
	out := make(Allocation, len(a))
	for k, v := range a {
		out[k] = *v.DeepCopy()
	}
	return out
}
