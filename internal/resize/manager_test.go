package resize

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	testclock "k8s.io/utils/clock/testing"
)

// world is the node a Manager decides for: pods as desired, the active
// ones, what synced, the events.
type world struct {
	pods   map[types.UID]*v1.Pod
	synced []types.UID
	events []string
}

func (w *world) Eventf(_ runtime.Object, kind, reason, format string, args ...interface{}) {
	w.events = append(w.events, kind+" "+reason+" "+fmt.Sprintf(format, args...))
}

func newWorld(t *testing.T, dir string) (*world, *Manager, *testclock.FakeClock) {
	t.Helper()
	store, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{pods: map[types.UID]*v1.Pod{}}
	clk := testclock.NewFakeClock(time.Unix(1000, 0))
	m := NewManager(Config{
		Store: store, Clock: clk, Recorder: w,
		Pod: func(uid types.UID) (*v1.Pod, bool) { p, ok := w.pods[uid]; return p, ok },
		Active: func() []*v1.Pod {
			var out []*v1.Pod
			for _, p := range w.pods {
				out = append(out, p)
			}
			return out
		},
		Allocatable: func() v1.ResourceList {
			return v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("1Gi")}
		},
		Static: func(*v1.Pod) bool { return false },
		Sync:   func(uid types.UID) { w.synced = append(w.synced, uid) },
	})
	return w, m, clk
}

func (w *world) add(m *Manager, p *v1.Pod) {
	w.pods[p.UID] = p
	m.Admitted(p)
}

// desire changes a pod's spec as a resize does.
func (w *world) desire(p *v1.Pod, r v1.ResourceRequirements) *v1.Pod {
	p = p.DeepCopy()
	p.Spec.Containers[0].Resources = r
	p.Generation++
	w.pods[p.UID] = p
	return p
}

func condOf(m *Manager, uid types.UID, t v1.PodConditionType) *v1.PodCondition {
	for _, c := range m.Conditions(uid) {
		if c.Type == t {
			return &c
		}
	}
	return nil
}

func cpuOf(m *Manager, p *v1.Pod) int64 {
	a, _ := m.Allocated(p)
	return a.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()
}

// A resize that does not fit beside the others is Deferred, with
// upstream's message; once another pod is gone it is allocated on retry,
// its pending condition cleared and its in-progress one set until the
// runtime has it. One that never fits is Infeasible and not retried.
func TestDeferredResizeIsAllocatedWhenResourcesFreeUp(t *testing.T) {
	w, m, clk := newWorld(t, t.TempDir())
	big := pod("big", rr("1200m", "", "", ""))
	small := pod("small", rr("500m", "", "", ""))
	w.add(m, big)
	w.add(m, small)

	small = w.desire(small, rr("1", "", "", ""))
	m.Resized(small.UID)
	c := condOf(m, small.UID, v1.PodResizePending)
	if c == nil || c.Reason != ReasonDeferred || c.Message != "Node didn't have enough resource: cpu, requested: 1000, used: 1200, capacity: 2000" {
		t.Fatalf("pending condition %+v", c)
	}
	if cpuOf(m, small) != 500 {
		t.Errorf("allocated %dm while deferred", cpuOf(m, small))
	}
	if len(w.events) != 1 || !strings.HasPrefix(w.events[0], `Warning ResizeDeferred Pod resize Deferred: {"containers":[{"name":"a","resources":{"requests":{"cpu":"1"}}}],"generation":2,"error":"Node didn't`) {
		t.Errorf("events %q", w.events)
	}

	clk.Step(time.Minute)
	m.Retry() // nothing freed: still deferred, same transition time, no new event
	if c2 := condOf(m, small.UID, v1.PodResizePending); c2 == nil || !c2.LastTransitionTime.Equal(&c.LastTransitionTime) || len(w.events) != 1 {
		t.Errorf("after a fruitless retry: %+v, events %q", c2, w.events)
	}

	delete(w.pods, big.UID)
	m.Forget(big.UID)
	m.Retry()
	if cpuOf(m, small) != 1000 || condOf(m, small.UID, v1.PodResizePending) != nil {
		t.Fatalf("after resources freed: allocated %dm, pending %+v", cpuOf(m, small), condOf(m, small.UID, v1.PodResizePending))
	}
	if condOf(m, small.UID, v1.PodResizeInProgress) == nil || w.synced[len(w.synced)-1] != small.UID {
		t.Errorf("in progress %+v, synced %v", condOf(m, small.UID, v1.PodResizeInProgress), w.synced)
	}

	huge := w.desire(small, rr("3", "", "", ""))
	m.Resized(huge.UID)
	if c := condOf(m, huge.UID, v1.PodResizePending); c == nil || c.Reason != ReasonInfeasible ||
		c.Message != "Node didn't have enough capacity: cpu, requested: 3000, capacity: 2000" {
		t.Errorf("infeasible: %+v", c)
	}
	if m.deferred(huge.UID) || len(m.pending) != 0 {
		t.Errorf("an infeasible resize stays queued: %v", m.pending)
	}
}

// Deferred resizes are retried in upstream's order: with room for one,
// the higher-priority pod gets it although it asked later.
func TestRetryOrder(t *testing.T) {
	w, m, _ := newWorld(t, "")
	hog := pod("hog", rr("1", "", "", ""))
	low, high := pod("low", rr("400m", "", "", "")), pod("high", rr("400m", "", "", ""))
	ten := int32(10)
	high.Spec.Priority = &ten
	for _, p := range []*v1.Pod{hog, low, high} {
		w.add(m, p)
	}
	low = w.desire(low, rr("800m", "", "", ""))
	m.Resized(low.UID)
	high = w.desire(high, rr("800m", "", "", ""))
	m.Resized(high.UID)
	if !m.deferred(low.UID) || !m.deferred(high.UID) {
		t.Fatal("both should wait")
	}
	w.desire(hog, rr("600m", "", "", "")) // shrinks: fits at once, leaves room for one
	m.Resized(hog.UID)
	if cpuOf(m, high) != 800 || cpuOf(m, low) != 400 {
		t.Errorf("high %dm low %dm: the higher priority should win", cpuOf(m, high), cpuOf(m, low))
	}
}

// The allocation survives a restart (a new Manager on the same
// directory): a resize accepted before is not lost, and admission after
// the restart keeps it rather than the spec; Track completes it once the
// actuated resources match, and a failure stays until then.
func TestAllocationSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	w, m, _ := newWorld(t, dir)
	p := pod("p", rr("500m", "", "", ""))
	w.add(m, p)
	p = w.desire(p, rr("1", "", "", ""))
	m.Resized(p.UID)

	w2, m2, _ := newWorld(t, dir)
	w2.add(m2, pod("p", rr("500m", "", "", ""))) // an older copy of the spec
	if got := cpuOf(m2, p); got != 1000 {
		t.Fatalf("allocated after restart %dm, want the accepted 1000m", got)
	}
	alloc, _ := m2.Allocated(p)
	running := func(string) bool { return true }
	if err := m2.cfg.Store.SetActuated(p.UID, "a", rr("500m", "", "", "")); err != nil {
		t.Fatal(err)
	}
	m2.Track(alloc, running)
	m2.Failed(alloc, "cannot decrease memory limits: x")
	m2.Track(alloc, running)
	if c := condOf(m2, p.UID, v1.PodResizeInProgress); c == nil || c.Reason != ReasonError || c.Message != "cannot decrease memory limits: x" {
		t.Errorf("in progress after a failure %+v", c)
	}
	if err := m2.cfg.Store.SetActuated(p.UID, "a", rr("1", "", "", "")); err != nil {
		t.Fatal(err)
	}
	m2.Track(alloc, running)
	if c := m2.Conditions(p.UID); len(c) != 0 {
		t.Errorf("conditions after the resize completed %+v", c)
	}
	if ev := w2.events[len(w2.events)-1]; !strings.HasPrefix(ev, "Normal ResizeCompleted Pod resize completed: ") {
		t.Errorf("last event %q", ev)
	}
	if _, err := Open(filepath.Join(dir, allocatedFile)); err == nil {
		t.Error("a file as the checkpoint directory opened")
	}
}
