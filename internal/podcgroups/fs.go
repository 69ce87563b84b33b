package podcgroups

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// cgroupFS is one cgroup layout: v1 (a hierarchy per controller) or v2
// (one unified hierarchy). Names are cgroup paths like /kubepods/podX.
type cgroupFS interface {
	version() int
	create(name string) error
	apply(name string, l Limits) error
	remove(name string) error
	children(name string) ([]string, error)
	hasFile(controller, name, file string) bool
	// memoryDir is the cgroup's directory with the memory controller's files.
	memoryDir(name string) string
}

// detect picks the layout mounted at root: v2 when root itself is a
// unified hierarchy, else v1 (a v1 "hybrid" host's extra unified mount is
// not used, as upstream).
func detect(root string, rmdir func(string) error) (cgroupFS, error) {
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		return &fsV2{root: root, rmdir: rmdir}, nil
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("read cgroup root %s: %w", root, err)
	}
	h := &fsV1{root: root, rmdir: rmdir, dirs: map[string]string{}}
	seen := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if name == "unified" {
			continue
		}
		dir, err := filepath.EvalSymlinks(filepath.Join(root, name))
		if err != nil {
			continue
		}
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			continue
		}
		for _, c := range strings.Split(filepath.Base(dir), ",") {
			h.dirs[c] = dir
		}
		if !seen[dir] {
			seen[dir] = true
			h.all = append(h.all, dir)
		}
	}
	for _, need := range []string{"cpu", "memory"} {
		if h.dirs[need] == "" {
			return nil, fmt.Errorf("cgroup v1 controller %q is not mounted under %s", need, root)
		}
	}
	sort.Strings(h.all)
	return h, nil
}

type fsV1 struct {
	root  string
	rmdir func(string) error
	dirs  map[string]string // controller -> its hierarchy's mount
	all   []string          // every hierarchy, once
}

func (h *fsV1) version() int { return 1 }

// create makes the cgroup in every hierarchy, so that nothing the runtime
// creates under it lands in a hierarchy Skiff does not clean up.
func (h *fsV1) create(name string) error {
	for _, dir := range h.all {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			return err
		}
	}
	if dir := h.dirs["cpuset"]; dir != "" {
		return initCpuset(dir, name)
	}
	return nil
}

// initCpuset copies cpus and mems down to new cpusets: an empty one
// refuses tasks.
func initCpuset(mount, name string) error {
	parts := strings.Split(strings.Trim(name, "/"), "/")
	for i := range parts {
		dir := filepath.Join(mount, filepath.Join(parts[:i+1]...))
		parent := filepath.Dir(dir)
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			cur, err := os.ReadFile(filepath.Join(dir, f))
			if err == nil && strings.TrimSpace(string(cur)) != "" {
				continue
			}
			val, err := os.ReadFile(filepath.Join(parent, f))
			if err != nil {
				continue // no such file: nothing to initialize
			}
			if err := os.WriteFile(filepath.Join(dir, f), val, 0o644); err != nil {
				return fmt.Errorf("initialize %s: %w", filepath.Join(dir, f), err)
			}
		}
	}
	return nil
}

func (h *fsV1) apply(name string, l Limits) error {
	var w writer
	if l.CPUShares != nil {
		w.write(h.dirs["cpu"], name, "cpu.shares", strconv.FormatUint(*l.CPUShares, 10))
	}
	if l.CPUPeriod != nil {
		w.write(h.dirs["cpu"], name, "cpu.cfs_period_us", strconv.FormatUint(*l.CPUPeriod, 10))
	}
	if l.CPUQuota != nil {
		w.write(h.dirs["cpu"], name, "cpu.cfs_quota_us", strconv.FormatInt(*l.CPUQuota, 10))
	}
	if l.Memory != nil {
		w.write(h.dirs["memory"], name, "memory.limit_in_bytes", strconv.FormatInt(*l.Memory, 10))
	}
	if l.Pids != nil && h.dirs["pids"] != "" {
		w.write(h.dirs["pids"], name, "pids.max", limitString(*l.Pids))
	}
	return w.err
}

func (h *fsV1) remove(name string) error {
	var errs []error
	for _, dir := range h.all {
		errs = append(errs, removeTree(filepath.Join(dir, name), h.rmdir))
	}
	return errors.Join(errs...)
}

func (h *fsV1) children(name string) ([]string, error) {
	return subdirs(filepath.Join(h.dirs["memory"], name))
}

func (h *fsV1) memoryDir(name string) string { return filepath.Join(h.dirs["memory"], name) }

func (h *fsV1) hasFile(controller, name, file string) bool {
	_, err := os.Stat(filepath.Join(h.dirs[controller], name, file))
	return err == nil
}

type fsV2 struct {
	root  string
	rmdir func(string) error
}

func (h *fsV2) version() int { return 2 }

// create makes the cgroup and enables the parent's controllers down to it.
func (h *fsV2) create(name string) error {
	parts := strings.Split(strings.Trim(name, "/"), "/")
	dir := h.root
	for _, p := range parts {
		if err := enableControllers(dir); err != nil {
			return err
		}
		dir = filepath.Join(dir, p)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	return nil
}

// enableControllers lets dir's children use the controllers Skiff sets.
func enableControllers(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("read controllers of %s: %w", dir, err)
	}
	var want []string
	for _, c := range strings.Fields(string(b)) {
		switch c {
		case "cpu", "cpuset", "memory", "pids", "io", "hugetlb":
			want = append(want, "+"+c)
		}
	}
	if len(want) == 0 {
		return nil
	}
	cur, _ := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if missing(strings.Fields(string(cur)), want) {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(strings.Join(want, " ")), 0o644); err != nil {
			return fmt.Errorf("enable controllers in %s: %w", dir, err)
		}
	}
	return nil
}

func missing(have, want []string) bool {
	set := map[string]bool{}
	for _, h := range have {
		set[strings.TrimPrefix(h, "+")] = true
	}
	for _, w := range want {
		if !set[strings.TrimPrefix(w, "+")] {
			return true
		}
	}
	return false
}

func (h *fsV2) apply(name string, l Limits) error {
	var w writer
	if l.CPUShares != nil {
		w.write(h.root, name, "cpu.weight", strconv.FormatUint(SharesToWeight(*l.CPUShares), 10))
	}
	if l.CPUQuota != nil && l.CPUPeriod != nil {
		w.write(h.root, name, "cpu.max", limitString(*l.CPUQuota)+" "+strconv.FormatUint(*l.CPUPeriod, 10))
	}
	if l.Memory != nil {
		w.write(h.root, name, "memory.max", limitString(*l.Memory))
	}
	if l.Pids != nil {
		w.write(h.root, name, "pids.max", limitString(*l.Pids))
	}
	return w.err
}

func (h *fsV2) remove(name string) error { return removeTree(filepath.Join(h.root, name), h.rmdir) }

func (h *fsV2) children(name string) ([]string, error) { return subdirs(filepath.Join(h.root, name)) }

func (h *fsV2) memoryDir(name string) string { return filepath.Join(h.root, name) }

func (h *fsV2) hasFile(_, name, file string) bool {
	_, err := os.Stat(filepath.Join(h.root, name, file))
	return err == nil
}

// limitString writes a negative limit as "max".
func limitString(v int64) string {
	if v < 0 {
		return "max"
	}
	return strconv.FormatInt(v, 10)
}

// writer writes cgroup files, keeping the first error.
type writer struct{ err error }

func (w *writer) write(mount, name, file, val string) {
	if w.err != nil {
		return
	}
	p := filepath.Join(mount, name, file)
	if cur, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(cur)) == val {
		return
	}
	if err := os.WriteFile(p, []byte(val), 0o644); err != nil {
		w.err = fmt.Errorf("write %s=%s: %w", p, val, err)
	}
}

// removeTree removes a cgroup and the ones below it, deepest first; a
// missing cgroup is already removed.
func removeTree(dir string, rmdir func(string) error) error {
	subs, err := subdirs(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, s := range subs {
		if err := removeTree(filepath.Join(dir, s), rmdir); err != nil {
			return err
		}
	}
	if err := rmdir(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove cgroup %s: %w", dir, err)
	}
	return nil
}

func subdirs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}
