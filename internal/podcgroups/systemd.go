package podcgroups

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"sync"

	"github.com/opencontainers/cgroups"
	cgmanager "github.com/opencontainers/cgroups/manager"
	cgsystemd "github.com/opencontainers/cgroups/systemd"
)

// systemdFS is the systemd cgroup driver: every QoS and pod cgroup is a
// slice that systemd creates, configures and removes, through the
// opencontainers/cgroups systemd manager (the library runc and the
// upstream kubelet use; it talks to systemd over D-Bus). Names are the
// slices' paths below each hierarchy's mount, e.g.
// /kubepods.slice/kubepods-burstable.slice. Reads (listing, existence)
// go to the cgroup filesystem at root.
type systemdFS struct {
	root string // /sys/fs/cgroup
	v2   bool

	mu      sync.Mutex
	applied map[string]Limits // the last limits set on each slice
}

func newSystemdFS(root string) (*systemdFS, error) {
	if !cgsystemd.IsRunningSystemd() {
		return nil, errors.New("cgroupDriver systemd: systemd is not running on this host (no /run/systemd/system): use cgroupfs, or run Skiff under systemd")
	}
	_, err := os.Stat(filepath.Join(root, "cgroup.controllers"))
	return &systemdFS{root: root, v2: err == nil, applied: map[string]Limits{}}, nil
}

func (s *systemdFS) version() int {
	if s.v2 {
		return 2
	}
	return 1
}

// unit splits a slice path into the parent slice and the slice itself,
// as the systemd manager wants them: /a.slice/a-b.slice is a-b.slice in
// a.slice; a top-level slice's parent is the root slice "-.slice".
func unit(name string) (parent, slice string) {
	dir, base := path.Split(path.Clean(name))
	if dir == "/" {
		return "-.slice", base
	}
	return path.Base(dir), base
}

// manager is the library's manager of one slice with res.
func (s *systemdFS) manager(name string, res *cgroups.Resources) (cgroups.Manager, error) {
	parent, slice := unit(name)
	// As upstream: pods get no device rules of their own (the runtime
	// sets the containers'), and a limit change needs no freeze.
	res.SkipDevices, res.SkipFreezeOnSet = true, true
	return cgmanager.New(&cgroups.Cgroup{Systemd: true, Parent: parent, Name: slice, Resources: res})
}

// dir is the slice's directory in a hierarchy systemd always keeps: the
// unified one on v2, memory on v1 (systemd enables memory accounting on
// every slice the manager starts).
func (s *systemdFS) dir(name string) string {
	if s.v2 {
		return filepath.Join(s.root, name)
	}
	return filepath.Join(s.root, "memory", name)
}

func (s *systemdFS) memoryDir(name string) string { return s.dir(name) }

func (s *systemdFS) exists(name string) bool {
	_, err := os.Stat(s.dir(name))
	return err == nil
}

// create starts the slice (systemd creates its parents) unless it is
// there already: Apply(-1) starts a unit with no process in it.
func (s *systemdFS) create(name string) error {
	if s.exists(name) {
		return nil
	}
	m, err := s.manager(name, &cgroups.Resources{})
	if err != nil {
		return err
	}
	if err := m.Apply(-1); err != nil {
		return fmt.Errorf("start slice %s: %w", name, err)
	}
	s.mu.Lock()
	delete(s.applied, name)
	s.mu.Unlock()
	return nil
}

// apply sets the slice's unit properties (and, on v1, the cgroup files
// systemd does not manage) unless the same limits were set last time.
func (s *systemdFS) apply(name string, l Limits) error {
	s.mu.Lock()
	last, ok := s.applied[name]
	s.mu.Unlock()
	if ok && reflect.DeepEqual(last, l) {
		return nil
	}
	res := s.resources(l)
	m, err := s.manager(name, res)
	if err != nil {
		return err
	}
	if err := m.Set(res); err != nil {
		return fmt.Errorf("set limits of slice %s: %w", name, err)
	}
	s.mu.Lock()
	s.applied[name] = l
	s.mu.Unlock()
	return nil
}

// resources turns Limits into the library's; zero leaves a setting alone.
func (s *systemdFS) resources(l Limits) *cgroups.Resources {
	r := &cgroups.Resources{}
	if l.CPUShares != nil {
		if s.v2 {
			r.CpuWeight = SharesToWeight(*l.CPUShares)
		} else {
			r.CpuShares = *l.CPUShares
		}
	}
	if l.CPUQuota != nil && l.CPUPeriod != nil {
		r.CpuQuota, r.CpuPeriod = *l.CPUQuota, *l.CPUPeriod
	}
	if l.Memory != nil {
		r.Memory = *l.Memory
	}
	if l.Pids != nil {
		p := *l.Pids
		r.PidsLimit = &p
	}
	return r
}

// remove stops the slice, which removes its cgroups; a slice that is
// not there is already removed.
func (s *systemdFS) remove(name string) error {
	s.mu.Lock()
	delete(s.applied, name)
	s.mu.Unlock()
	if !s.exists(name) {
		return nil
	}
	m, err := s.manager(name, &cgroups.Resources{})
	if err != nil {
		return err
	}
	if err := m.Destroy(); err != nil {
		return fmt.Errorf("stop slice %s: %w", name, err)
	}
	return nil
}

func (s *systemdFS) children(name string) ([]string, error) { return subdirs(s.dir(name)) }

func (s *systemdFS) hasFile(controller, name, file string) bool {
	dir := filepath.Join(s.root, name)
	if !s.v2 {
		dir = filepath.Join(s.root, controller, name)
	}
	_, err := os.Stat(filepath.Join(dir, file))
	return err == nil
}
