package eviction

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	testclock "k8s.io/utils/clock/testing"
)

const mi = 1 << 20

func u64(v uint64) *uint64 { return &v }

// fakeNode is a node's stats the tests change between looks.
type fakeNode struct {
	clock            *testclock.FakeClock
	memCap, memAvail uint64
	fsCap, fsAvail   uint64
	pods             map[string]statsapi.PodStats // by UID
	reclaimed        []string
	reclaimFrees     uint64 // bytes a node-level reclaim frees
	evicted          []string
	graces           []int64
	messages         []string
	refuseEvict      bool
	sampled          int // summaries asked sampled now
	// freesLate is what a node-level reclaim frees only by the second
	// sample after it, as containerd's garbage collection does.
	freesLate, pending uint64
	pendingAt          int
}

func (f *fakeNode) summary(_ context.Context, sample bool) (*statsapi.Summary, error) {
	if sample {
		f.sampled++
		if f.pending > 0 && f.sampled >= f.pendingAt {
			f.fsAvail, f.pending = f.fsAvail+f.pending, 0
		}
	}
	t := metav1.NewTime(f.clock.Now())
	s := &statsapi.Summary{Node: statsapi.NodeStats{
		Memory: &statsapi.MemoryStats{Time: t, AvailableBytes: u64(f.memAvail), WorkingSetBytes: u64(f.memCap - f.memAvail)},
		Fs:     &statsapi.FsStats{Time: t, AvailableBytes: u64(f.fsAvail), CapacityBytes: u64(f.fsCap), Inodes: u64(1000), InodesFree: u64(900)},
	}}
	for _, p := range f.pods {
		s.Pods = append(s.Pods, p)
	}
	return s, nil
}

func (f *fakeNode) manager(thresholds []Threshold, pods []*v1.Pod) *Pressure {
	return NewPressure(PressureConfig{
		Thresholds: thresholds, TransitionPeriod: time.Minute, MaxPodGracePeriod: 7, LocalStorage: true,
		Summary: f.summary,
		Pods:    func() []*v1.Pod { return pods },
		Evict: func(p *v1.Pod, grace int64, msg string) bool {
			if f.refuseEvict {
				return false
			}
			f.evicted, f.graces, f.messages = append(f.evicted, p.Name), append(f.graces, grace), append(f.messages, msg)
			return true
		},
		CleanedUp: func(*v1.Pod) bool { return true },
		ReclaimContainers: func(context.Context) error {
			f.reclaimed = append(f.reclaimed, "containers")
			return nil
		},
		ReclaimImages: func(context.Context) error {
			f.reclaimed = append(f.reclaimed, "images")
			f.fsAvail += f.reclaimFrees
			f.pending, f.pendingAt = f.freesLate, f.sampled+2
			return nil
		},
		Clock: f.clock,
	})
}

func rankedPod(name string, memRequest string, priority int32) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name)},
		Spec:       v1.PodSpec{Priority: &priority, Containers: []v1.Container{{Name: "c"}}},
	}
	if memRequest != "" {
		q := resource.MustParse(memRequest)
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: q}
	}
	return p
}

func podStats(name string, workingSet uint64, rootfs uint64) statsapi.PodStats {
	mem := &statsapi.MemoryStats{WorkingSetBytes: u64(workingSet)}
	return statsapi.PodStats{
		PodRef: statsapi.PodReference{Name: name, Namespace: "ns", UID: name},
		Memory: mem,
		Containers: []statsapi.ContainerStats{{Name: "c", Memory: mem,
			Rootfs: &statsapi.FsStats{UsedBytes: u64(rootfs)}, Logs: &statsapi.FsStats{UsedBytes: u64(0)}}},
	}
}

func hard(s Signal, q string) Threshold {
	v := resource.MustParse(q)
	return Threshold{Signal: s, Value: Value{Quantity: &v}}
}

func newFake() *fakeNode {
	return &fakeNode{clock: testclock.NewFakeClock(time.Unix(1e9, 0)), memCap: 8192 * mi, memAvail: 4096 * mi,
		fsCap: 10000 * mi, fsAvail: 5000 * mi, pods: map[string]statsapi.PodStats{}}
}

func TestMemoryPressureEvictsByRank(t *testing.T) {
	f := newFake()
	// guaranteed uses less than it requests; big and small exceed theirs
	// (none); low has the lowest priority but stays within its request.
	pods := []*v1.Pod{rankedPod("guaranteed", "512Mi", 0), rankedPod("small", "", 0), rankedPod("big", "", 0), rankedPod("low", "1Gi", -10)}
	f.pods["guaranteed"] = podStats("guaranteed", 256*mi, 0)
	f.pods["small"] = podStats("small", 100*mi, 0)
	f.pods["big"] = podStats("big", 900*mi, 0)
	f.pods["low"] = podStats("low", 512*mi, 0)
	m := f.manager([]Threshold{hard(SignalMemoryAvailable, "1Gi")}, pods)

	m.Synchronize(context.Background())
	if len(f.evicted) != 0 || len(m.Conditions()) != 0 {
		t.Fatalf("no pressure yet: evicted %v, conditions %v", f.evicted, m.Conditions())
	}
	f.memAvail = 900 * mi
	f.clock.Step(10 * time.Second)
	m.Synchronize(context.Background())
	if got := m.Conditions(); len(got) != 1 || got[0] != v1.NodeMemoryPressure {
		t.Errorf("conditions %v", got)
	}
	if len(f.evicted) != 1 || f.evicted[0] != "big" || f.graces[0] != 1 {
		t.Fatalf("evicted %v with grace %v; want big (the largest above its request) with 1", f.evicted, f.graces)
	}
	want := "The node was low on resource: memory. Threshold quantity: 1Gi, available: 900Mi. Container c was using 900Mi, request is 0, has larger consumption of memory. "
	if f.messages[0] != want {
		t.Errorf("message\n got %q\nwant %q", f.messages[0], want)
	}
	// Pressure gone: the condition holds for the transition period.
	f.memAvail = 4096 * mi
	f.clock.Step(30 * time.Second)
	m.Synchronize(context.Background())
	if len(m.Conditions()) != 1 || len(f.evicted) != 1 {
		t.Errorf("within the transition period: conditions %v, evicted %v", m.Conditions(), f.evicted)
	}
	f.clock.Step(31 * time.Second)
	m.Synchronize(context.Background())
	if len(m.Conditions()) != 0 {
		t.Errorf("after the transition period: conditions %v", m.Conditions())
	}
}

func TestSoftThresholdWaitsGracePeriod(t *testing.T) {
	f := newFake()
	pods := []*v1.Pod{rankedPod("a", "", 0)}
	f.pods["a"] = podStats("a", 100*mi, 0)
	soft := hard(SignalMemoryAvailable, "1Gi")
	soft.GracePeriod = 30 * time.Second
	m := f.manager([]Threshold{soft}, pods)
	f.memAvail = 512 * mi
	m.Synchronize(context.Background())
	if len(m.Conditions()) != 1 || len(f.evicted) != 0 {
		t.Fatalf("first observation: conditions %v (want MemoryPressure), evicted %v (want none)", m.Conditions(), f.evicted)
	}
	f.clock.Step(20 * time.Second)
	m.Synchronize(context.Background())
	if len(f.evicted) != 0 {
		t.Fatalf("evicted %v before the grace period", f.evicted)
	}
	f.clock.Step(11 * time.Second)
	m.Synchronize(context.Background())
	if len(f.evicted) != 1 || f.graces[0] != 7 {
		t.Fatalf("after the grace period: evicted %v with %v; want a with evictionMaxPodGracePeriod 7", f.evicted, f.graces)
	}
}

func TestDiskPressureReclaimsNodeFirst(t *testing.T) {
	f := newFake()
	pods := []*v1.Pod{rankedPod("writer", "", 0), rankedPod("quiet", "", 0)}
	f.pods["writer"] = podStats("writer", 0, 800*mi)
	f.pods["quiet"] = podStats("quiet", 0, 1*mi)
	th := hard(SignalNodeFsAvailable, "1000Mi")
	mr := resource.MustParse("200Mi")
	th.MinReclaim = &Value{Quantity: &mr}
	m := f.manager([]Threshold{th}, pods)

	// Reclaim frees 150Mi: above the threshold but short of the minimum
	// reclaim, so a pod goes too.
	f.fsAvail, f.reclaimFrees = 900*mi, 150*mi
	m.Synchronize(context.Background())
	if strings.Join(f.reclaimed, ",") != "containers,images" {
		t.Errorf("node-level reclaim %v; want containers then images", f.reclaimed)
	}
	// What reclaim freed is judged on stats sampled after it, as
	// upstream's, not on the recent ones the look began with.
	if f.sampled == 0 {
		t.Error("no summary sampled anew after the reclaim")
	}
	if len(m.Conditions()) != 1 || m.Conditions()[0] != v1.NodeDiskPressure {
		t.Errorf("conditions %v", m.Conditions())
	}
	if len(f.evicted) != 1 || f.evicted[0] != "writer" {
		t.Fatalf("evicted %v; want writer", f.evicted)
	}
	if !strings.HasPrefix(f.messages[0], "The node was low on resource: ephemeral-storage. Threshold quantity: 1000Mi, available: 900Mi. Container c was using 800Mi") {
		t.Errorf("message %q", f.messages[0])
	}
	// Next time reclaim frees enough (threshold plus minimum reclaim): no
	// pod is evicted.
	f.fsAvail, f.reclaimFrees, f.evicted = 900*mi, 400*mi, nil
	f.clock.Step(10 * time.Second)
	m.Synchronize(context.Background())
	if len(f.evicted) != 0 {
		t.Errorf("evicted %v though node-level reclaim sufficed", f.evicted)
	}
}

// Space a reclaim frees that shows only a moment later (the runtime's
// garbage collection) still spares the pods.
func TestDiskPressureReclaimFreedLate(t *testing.T) {
	f := newFake()
	pods := []*v1.Pod{rankedPod("writer", "", 0)}
	f.pods["writer"] = podStats("writer", 0, 800*mi)
	m := f.manager([]Threshold{hard(SignalNodeFsAvailable, "1000Mi")}, pods)
	f.fsAvail, f.freesLate = 900*mi, 400*mi
	m.Synchronize(context.Background())
	if len(f.evicted) != 0 {
		t.Errorf("evicted %v though the reclaim freed enough, a sample later", f.evicted)
	}
	if f.sampled != 2 {
		t.Errorf("%d samples after the reclaim; want 2", f.sampled)
	}
	// Never enough: it gives up after a while and evicts.
	f.fsAvail, f.freesLate = 900*mi, 0
	f.clock.Step(10 * time.Second)
	m.Synchronize(context.Background())
	if len(f.evicted) != 1 {
		t.Errorf("evicted %v; want writer once the reclaim is short", f.evicted)
	}
}

func TestCriticalPodsAreNotEvicted(t *testing.T) {
	f := newFake()
	static := rankedPod("static", "", 0)
	static.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
	critical := rankedPod("critical", "", systemCriticalPriority)
	f.pods["static"] = podStats("static", 3000*mi, 0)
	f.pods["critical"] = podStats("critical", 3000*mi, 0)
	m := f.manager([]Threshold{hard(SignalMemoryAvailable, "1Gi")}, []*v1.Pod{static, critical})
	f.memAvail = 100 * mi
	m.Synchronize(context.Background())
	if len(f.evicted) != 0 {
		t.Errorf("evicted %v", f.evicted)
	}
}

func TestContainerEphemeralStorageLimit(t *testing.T) {
	f := newFake()
	p := rankedPod("limited", "", 0)
	p.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("10Mi")}
	ok := rankedPod("fine", "", 0)
	ok.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("10Mi")}
	f.pods["limited"] = podStats("limited", 0, 11*mi)
	f.pods["fine"] = podStats("fine", 0, 9*mi)
	m := f.manager(nil, []*v1.Pod{p, ok})
	m.Synchronize(context.Background())
	if len(f.evicted) != 1 || f.evicted[0] != "limited" {
		t.Fatalf("evicted %v", f.evicted)
	}
	// One container: its limit is the pod's total too, checked first.
	if want := "Pod ephemeral local storage usage exceeds the total limit of containers 10Mi. "; f.messages[0] != want {
		t.Errorf("message %q, want %q", f.messages[0], want)
	}
	p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "other"})
	p.Spec.Containers[1].Resources.Limits = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("1Gi")}
	f.evicted, f.messages = nil, nil
	m.Synchronize(context.Background())
	if want := "Container c exceeded its local ephemeral storage limit \"10Mi\". "; len(f.messages) != 1 || f.messages[0] != want {
		t.Errorf("messages %q, want %q", f.messages, want)
	}
}

func TestParseThresholds(t *testing.T) {
	kc := &kubeletconfigv1beta1.KubeletConfiguration{
		EvictionHard:            map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "imagefs.available": "0%", "containerfs.available": "5%"},
		EvictionSoft:            map[string]string{"nodefs.inodesFree": "20%"},
		EvictionSoftGracePeriod: map[string]string{"nodefs.inodesFree": "1m30s"},
		EvictionMinimumReclaim:  map[string]string{"nodefs.available": "500Mi"},
		EnforceNodeAllocatable:  []string{"pods"},
	}
	got, warnings, err := ParseThresholds(kc, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 {
		t.Errorf("warnings %v; want one for containerfs.available", warnings)
	}
	byKey := map[string]Threshold{}
	for _, th := range got {
		byKey[th.key()] = th
	}
	for key, want := range map[string]string{
		"memory.available/hard": "100Mi", "allocatableMemory.available/hard": "100Mi", "nodefs.available/hard": "10%",
		"containerfs.available/hard": "10%", "nodefs.inodesFree/soft": "20%", "containerfs.inodesFree/soft": "20%",
	} {
		if th, ok := byKey[key]; !ok || th.Value.String() != want {
			t.Errorf("%s: %+v, want %s", key, th, want)
		}
	}
	if _, ok := byKey["imagefs.available/hard"]; ok {
		t.Error("imagefs.available 0% is off, as upstream")
	}
	if len(got) != 6 {
		t.Errorf("%d thresholds: %+v", len(got), got)
	}
	if th := byKey["nodefs.inodesFree/soft"]; th.GracePeriod != 90*time.Second {
		t.Errorf("grace %v", th.GracePeriod)
	}
	if th := byKey["nodefs.available/hard"]; th.MinReclaim == nil || th.MinReclaim.String() != "500Mi" || th.Value.of(1000) != 100 {
		t.Errorf("nodefs: %+v", th)
	}
	if th := byKey["containerfs.available/hard"]; th.MinReclaim == nil {
		t.Error("containerfs follows nodefs with its minimum reclaim")
	}
	kc.EvictionSoftGracePeriod = nil
	if _, _, err := ParseThresholds(kc, false); err == nil {
		t.Error("a soft threshold without a grace period is accepted")
	}
}

// Thresholds from Configure, asked as Run begins, are the ones acted on;
// when Configure fails the manager does nothing.
func TestRunTakesThresholdsFromConfigure(t *testing.T) {
	f := newFake()
	f.memAvail = 900 * mi
	f.pods["big"] = podStats("big", 900*mi, 0)
	pods := []*v1.Pod{rankedPod("big", "", 0)}

	failing := f.manager(nil, pods)
	failing.cfg.Configure = func(context.Context) ([]Threshold, bool, error) {
		return nil, false, errors.New("no image filesystem")
	}
	failing.Run(context.Background()) // returns at once: nothing to run
	if len(f.evicted) != 0 {
		t.Fatalf("evicted %v with no usable thresholds", f.evicted)
	}

	m := f.manager(nil, pods)
	m.cfg.Configure = func(context.Context) ([]Threshold, bool, error) {
		return []Threshold{hard(SignalMemoryAvailable, "1Gi")}, false, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m.cfg.Evict = func(p *v1.Pod, _ int64, _ string) bool {
		if len(f.evicted) > 0 {
			return false
		}
		f.evicted = append(f.evicted, p.Name)
		cancel() // Run returns once nothing more is evicted
		return true
	}
	m.Run(ctx)
	if len(f.evicted) != 1 || f.evicted[0] != "big" {
		t.Fatalf("evicted %v, want big under the configured memory threshold", f.evicted)
	}
	if got := m.Conditions(); len(got) != 1 || got[0] != v1.NodeMemoryPressure {
		t.Errorf("conditions %v, want MemoryPressure", got)
	}
}
