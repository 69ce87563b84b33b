package podruntime

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/podcgroups"
	"github.com/skiff-sh/skiff/internal/resize"
)

// Actuation remembers what each container was last given, so a restarted
// Skiff neither repeats nor forgets a resize; *resize.Store fits.
type Actuation interface {
	Actuated(uid types.UID, name string) (v1.ResourceRequirements, bool)
	SetActuated(uid types.UID, name string, r v1.ResourceRequirements) error
}

// PodResizer changes a pod's cgroup during an in-place resize, one
// setting at a time; *podcgroups.Manager fits.
type PodResizer interface {
	PodLimits(pod *v1.Pod) podcgroups.Limits
	SetPodSetting(pod *v1.Pod, s podcgroups.Setting) error
	PodMemoryUsage(pod *v1.Pod) (int64, error)
}

// inPlace is one running container to resize without a restart.
type inPlace struct {
	c      *v1.Container           // as allocated
	id     string                  // its running instance
	cur    v1.ResourceRequirements // what it has, updated step by step
	change resize.Change
}

// resizeInPlace gives running containers, and the pod cgroup, their
// allocated resources (the pod's spec here) in upstream's safe order:
// memory first, then CPU; for each, a growing pod limit before the
// containers and a shrinking one after (requests the other way round),
// and among the containers decreases before increases. A memory limit
// is never lowered below what is in use: the resize then fails, to be
// retried. Containers whose resize policy asks for a restart are left to
// the sync, which restarts them.
func (m *Manager) resizeInPlace(ctx context.Context, s *podSync) {
	if m.cfg.Actuation == nil || m.cfg.PodResizer == nil || m.cfg.Resources == nil {
		return
	}
	current := s.pod.DeepCopy() // the pod as the runtime has it now
	var updates []*inPlace
	resize.Resizable(current, func(c *v1.Container) {
		cs := s.current(c.Name)
		if cs == nil || cs.State != container.StateRunning {
			return
		}
		act, ok := m.cfg.Actuation.Actuated(s.pod.UID, c.Name)
		if !ok { // started before Skiff kept records: it has its spec's
			m.setActuated(s.pod, c.Name, c.Resources)
			return
		}
		alloc := c.DeepCopy()
		c.Resources = act
		if ch := resize.Plan(alloc, act); !ch.None() && !ch.Restart {
			updates = append(updates, &inPlace{c: alloc, id: cs.ID, cur: *act.DeepCopy(), change: ch})
		}
	})
	want, have := m.cfg.PodResizer.PodLimits(s.pod), m.cfg.PodResizer.PodLimits(current)
	if len(updates) == 0 && samePodLimits(want, have) {
		return
	}
	if err := m.checkMemoryDecrease(ctx, s.pod, updates, want, have); err != nil {
		s.res.ResizeErr = err
		return
	}
	s.res.Resized = true // even a partial resize changes what the runtime reports
	for _, res := range []v1.ResourceName{v1.ResourceMemory, v1.ResourceCPU} {
		if err := m.resizeResource(ctx, s.pod, res, updates, want, have); err != nil {
			s.res.ResizeErr = err
			return
		}
	}
	klog.V(2).InfoS("Resized pod in place", "pod", klog.KObj(s.pod), "containers", len(updates))
}

// resizeResource moves one resource of the pod cgroup and the containers.
func (m *Manager) resizeResource(ctx context.Context, pod *v1.Pod, res v1.ResourceName, updates []*inPlace, want, have podcgroups.Limits) error {
	limit, request := podcgroups.SettingMemory, podcgroups.Setting(-1)
	limCmp, reqCmp := cmpLimit(want.Memory, have.Memory), 0
	if res == v1.ResourceCPU {
		limit, request = podcgroups.SettingCPUQuota, podcgroups.SettingCPUShares
		limCmp, reqCmp = cmpLimit(want.CPUQuota, have.CPUQuota), cmpShares(want.CPUShares, have.CPUShares)
	}
	set := func(s podcgroups.Setting, when bool) error {
		if !when || s < 0 {
			return nil
		}
		return m.cfg.PodResizer.SetPodSetting(pod, s)
	}
	if err := set(limit, limCmp > 0); err != nil {
		return err
	}
	if err := set(request, reqCmp < 0); err != nil {
		return err
	}
	for _, u := range ordered(updates, res) {
		if err := m.updateContainer(ctx, pod, u, res); err != nil {
			return err
		}
	}
	if err := set(limit, limCmp < 0); err != nil {
		return err
	}
	return set(request, reqCmp > 0)
}

// updateContainer gives one container the allocated values of res,
// keeping what it has of the other resource, and records the result.
func (m *Manager) updateContainer(ctx context.Context, pod *v1.Pod, u *inPlace, res v1.ResourceName) error {
	next := *u.cur.DeepCopy()
	for _, l := range []*v1.ResourceList{&next.Requests, &next.Limits} {
		if *l == nil {
			*l = v1.ResourceList{}
		}
	}
	for name, from := range map[*v1.ResourceList]v1.ResourceList{&next.Requests: u.c.Resources.Requests, &next.Limits: u.c.Resources.Limits} {
		if q, ok := from[res]; ok {
			(*name)[res] = q.DeepCopy()
		} else {
			delete(*name, res)
		}
	}
	c := u.c.DeepCopy()
	c.Resources = next
	lr := m.cfg.Resources.ContainerResources(pod, c)
	if lr == nil {
		lr = &runtimeapi.LinuxContainerResources{}
	}
	lr.OomScoreAdj = 0 // set at creation; an update leaves it
	if err := m.cfg.CRI.Runtime.UpdateContainerResources(ctx, u.id, &runtimeapi.ContainerResources{Linux: lr}); err != nil {
		return fmt.Errorf("update %s resources of container %q: %w", res, u.c.Name, err)
	}
	u.cur = next
	m.setActuated(pod, u.c.Name, next)
	return nil
}

// ordered lists the containers whose res changes, decreases first.
func ordered(updates []*inPlace, res v1.ResourceName) []*inPlace {
	var down, up []*inPlace
	for _, u := range updates {
		if (res == v1.ResourceCPU && !u.change.CPU) || (res == v1.ResourceMemory && !u.change.Memory) {
			continue
		}
		want, have := value(u.c.Resources.Limits, res), value(u.cur.Limits, res)
		if want == have {
			want, have = value(u.c.Resources.Requests, res), value(u.cur.Requests, res)
		}
		if want < have {
			down = append(down, u)
		} else {
			up = append(up, u)
		}
	}
	return append(down, up...)
}

// checkMemoryDecrease refuses, as upstream, to set a memory limit of the
// pod or of a container at or below its current memory usage (page cache
// included, as upstream reads it): that could make the kernel OOM-kill it.
func (m *Manager) checkMemoryDecrease(ctx context.Context, pod *v1.Pod, updates []*inPlace, want, have podcgroups.Limits) error {
	var errs []error
	if cmpLimit(want.Memory, have.Memory) < 0 && want.Memory != nil {
		usage, err := m.cfg.PodResizer.PodMemoryUsage(pod)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("unable to read memory usage for pod %q", podString(pod)))
		case usage >= *want.Memory:
			errs = append(errs, fmt.Errorf("attempting to set pod memory limit (%d) below current usage (%d)", *want.Memory, usage))
		}
	}
	for _, u := range updates {
		limit, cur := value(u.c.Resources.Limits, v1.ResourceMemory), value(u.cur.Limits, v1.ResourceMemory)
		if !u.change.Memory || limit == 0 || (cur != 0 && limit >= cur) {
			continue
		}
		st, err := m.cfg.CRI.Runtime.ContainerStats(ctx, u.id)
		usage := st.GetMemory().GetUsageBytes()
		switch {
		case err != nil || usage == nil:
			errs = append(errs, fmt.Errorf("missing container %q memory usage", u.c.Name))
		case int64(usage.GetValue()) >= limit:
			errs = append(errs, fmt.Errorf("attempting to set container %q memory limit (%d) below current usage (%d)", u.c.Name, limit, usage.GetValue()))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("cannot decrease memory limits: %w", utilerrors.NewAggregate(errs))
	}
	return nil
}

// resizeRestart restarts a running container whose resize policy asks
// for a restart to take its allocated resources, as upstream: only that
// container. It reports whether it acted.
func (m *Manager) resizeRestart(ctx context.Context, s *podSync, c *v1.Container, cs *container.ContainerStatus) bool {
	if m.cfg.Actuation == nil {
		return false
	}
	act, ok := m.cfg.Actuation.Actuated(s.pod.UID, c.Name)
	if !ok || !resize.Plan(c, act).Restart {
		return false
	}
	if err := m.killContainer(ctx, s.pod, cs, nil, fmt.Sprintf("Container %s resize requires restart", c.Name)); err != nil {
		s.res.Err = err
		return true
	}
	s.res.Started = true // the status the sync began with is stale
	m.startContainer(ctx, s, c, cs)
	return true
}

func (m *Manager) setActuated(pod *v1.Pod, name string, r v1.ResourceRequirements) {
	if m.cfg.Actuation == nil {
		return
	}
	if err := m.cfg.Actuation.SetActuated(pod.UID, name, r); err != nil {
		klog.ErrorS(err, "Cannot record a container's resources", "pod", klog.KObj(pod), "container", name)
	}
}

// value is a quantity as the cgroups take it: millicores, bytes; 0 unset.
func value(l v1.ResourceList, res v1.ResourceName) int64 {
	q, ok := l[res]
	if !ok {
		return 0
	}
	if res == v1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// cmpLimit compares two cgroup limits, where unset or negative is none.
func cmpLimit(a, b *int64) int {
	unlimited := func(p *int64) bool { return p == nil || *p < 0 }
	switch {
	case unlimited(a) && unlimited(b):
		return 0
	case unlimited(a):
		return 1
	case unlimited(b):
		return -1
	case *a > *b:
		return 1
	case *a < *b:
		return -1
	}
	return 0
}

func cmpShares(a, b *uint64) int {
	var x, y uint64
	if a != nil {
		x = *a
	}
	if b != nil {
		y = *b
	}
	switch {
	case x > y:
		return 1
	case x < y:
		return -1
	}
	return 0
}

func samePodLimits(a, b podcgroups.Limits) bool {
	return cmpLimit(a.Memory, b.Memory) == 0 && cmpLimit(a.CPUQuota, b.CPUQuota) == 0 && cmpShares(a.CPUShares, b.CPUShares) == 0
}

// podString names a pod as upstream's messages do: name_namespace(uid).
func podString(pod *v1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}
