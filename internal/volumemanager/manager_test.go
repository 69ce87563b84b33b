package volumemanager

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/volume"
)

// fakeMounter sets volumes up as each volume's setUp says (success by
// default) and counts the calls.
type fakeMounter struct {
	mu       sync.Mutex
	setUp    map[string]func(ctx context.Context) error // by volume name
	calls    map[string]int
	tornDown []types.UID
	released []types.UID // TearDownVolumes: the volumes, not the directory
}

func newFakeMounter() *fakeMounter {
	return &fakeMounter{setUp: map[string]func(context.Context) error{}, calls: map[string]int{}}
}

func (f *fakeMounter) SetUpVolume(ctx context.Context, pod *v1.Pod, vol *v1.Volume) (volume.Mounted, error) {
	f.mu.Lock()
	f.calls[vol.Name]++
	fn := f.setUp[vol.Name]
	f.mu.Unlock()
	if fn != nil {
		if err := fn(ctx); err != nil {
			return volume.Mounted{}, err
		}
	}
	return volume.Mounted{HostPath: "/host/" + string(pod.UID) + "/" + vol.Name}, nil
}

func (f *fakeMounter) TearDown(_ context.Context, uid types.UID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tornDown = append(f.tornDown, uid)
	return nil
}

func (f *fakeMounter) TearDownVolumes(_ context.Context, uid types.UID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released = append(f.released, uid)
	return nil
}

func (f *fakeMounter) set(name string, fn func(context.Context) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setUp[name] = fn
}

func (f *fakeMounter) count(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[name]
}

type event struct{ reason, message string }

type fakeRecorder struct {
	mu     sync.Mutex
	events []event
}

func (r *fakeRecorder) Eventf(_ runtime.Object, _, reason, format string, args ...interface{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, event{reason, fmt.Sprintf(format, args...)})
}

func (r *fakeRecorder) list() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event(nil), r.events...)
}

func podWith(uid string, vols ...v1.Volume) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, Namespace: "ns", UID: types.UID(uid)}, Spec: v1.PodSpec{Volumes: vols}}
}

func emptyDir(name string) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}
}

func configMap(name string) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}}
}

type harness struct {
	m     *Manager
	mnt   *fakeMounter
	rec   *fakeRecorder
	clock *testingclock.FakeClock
}

func start(t *testing.T, opts ...func(*Config)) *harness {
	t.Helper()
	h := &harness{mnt: newFakeMounter(), rec: &fakeRecorder{}, clock: testingclock.NewFakeClock(time.Unix(1e9, 0))}
	cfg := Config{Mounter: h.mnt, Recorder: h.rec, Clock: h.clock}
	for _, o := range opts {
		o(&cfg)
	}
	h.m = New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.m.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return h
}

// eventually polls cond, stepping the fake clock so that back-offs end.
func (h *harness) eventually(t *testing.T, what string, step time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		if step > 0 {
			h.clock.Step(step)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestWaitForMountReturnsEveryVolume(t *testing.T) {
	h := start(t)
	pod := podWith("a", emptyDir("one"), emptyDir("two"))
	got, err := h.m.WaitForMount(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["one"].HostPath != "/host/a/one" || got["two"].HostPath != "/host/a/two" {
		t.Fatalf("mounted %v", got)
	}
	// Set up once: a second wait finds them in the actual state.
	if _, err := h.m.WaitForMount(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if n := h.mnt.count("one"); n != 1 {
		t.Errorf("emptyDir set up %d times, want 1", n)
	}
}

func TestStuckVolumeBlocksNoOtherPod(t *testing.T) {
	h := start(t)
	release := make(chan struct{})
	h.mnt.set("stuck", func(ctx context.Context) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	stuckPod := podWith("s", emptyDir("stuck"))
	waitErr := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _, err := h.m.WaitForMount(ctx, stuckPod); waitErr <- err }()
	h.eventually(t, "the stuck setup to start", 0, func() bool { return h.mnt.count("stuck") == 1 })

	// Another pod's volumes are set up meanwhile.
	if _, err := h.m.WaitForMount(context.Background(), podWith("b", emptyDir("fine"))); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waitErr:
		t.Fatalf("the stuck pod's wait ended: %v", err)
	default:
	}
	close(release)
	if err := <-waitErr; err != nil {
		t.Fatalf("after release: %v", err)
	}
}

func TestFailedSetupIsRetriedWithBackOffAndReported(t *testing.T) {
	h := start(t)
	var fail sync.Map
	fail.Store("on", true)
	h.mnt.set("claim", func(context.Context) error {
		if v, _ := fail.Load("on"); v.(bool) {
			return errors.New("PVC is not bound")
		}
		return nil
	})
	pod := podWith("c", v1.Volume{Name: "claim"})
	done := make(chan error, 1)
	go func() { _, err := h.m.WaitForMount(context.Background(), pod); done <- err }()
	h.eventually(t, "two attempts", initialBackOff, func() bool { return h.mnt.count("claim") >= 2 })
	evs := h.rec.list()
	if len(evs) < 1 || evs[0].reason != "FailedMount" || !strings.Contains(evs[0].message, "PVC is not bound") ||
		!strings.Contains(evs[0].message, `volume "claim"`) {
		t.Fatalf("events %v", evs)
	}
	fail.Store("on", false)
	h.eventually(t, "the retry to succeed", maxBackOff, func() bool { return len(done) == 1 })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestBackOffDoublesToItsCap(t *testing.T) {
	for n, want := range map[int]time.Duration{1: 500 * time.Millisecond, 2: time.Second, 4: 4 * time.Second, 20: maxBackOff} {
		if got := backOff(n); got != want {
			t.Errorf("backOff(%d) = %v, want %v", n, got, want)
		}
	}
}

func TestAPIDataVolumesAreRefreshedOnEverySync(t *testing.T) {
	h := start(t)
	pod := podWith("r", configMap("cm"), emptyDir("scratch"))
	if _, err := h.m.WaitForMount(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if _, err := h.m.WaitForMount(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	h.eventually(t, "the configMap set up again", 0, func() bool { return h.mnt.count("cm") == 2 })
	if n := h.mnt.count("scratch"); n != 1 {
		t.Errorf("emptyDir set up %d times, want 1", n)
	}
}

func TestWaitTimesOutNamingTheVolumeAndCause(t *testing.T) {
	h := start(t)
	h.mnt.set("bad", func(context.Context) error { return errors.New("no such claim") })
	pod := podWith("t", emptyDir("good"), v1.Volume{Name: "bad"})
	done := make(chan error, 1)
	go func() { _, err := h.m.WaitForMount(context.Background(), pod); done <- err }()
	h.eventually(t, "the wait to time out", 10*time.Second, func() bool { return len(done) == 1 })
	err := <-done
	if !errors.Is(err, errTimeout) || !strings.Contains(err.Error(), "unmounted volumes=[bad]") ||
		!strings.Contains(err.Error(), "no such claim") {
		t.Fatalf("error %v", err)
	}
}

func TestTearDownWaitsForRunningSetupAndStopsRetries(t *testing.T) {
	h := start(t)
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h.mnt.set("slow", func(context.Context) error {
		once.Do(func() { close(entered) })
		<-release
		return errors.New("failed")
	})
	pod := podWith("d", v1.Volume{Name: "slow"})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _, _ = h.m.WaitForMount(ctx, pod) }()
	<-entered
	cancel()
	tornDown := make(chan error, 1)
	go func() { tornDown <- h.m.TearDownPod(context.Background(), pod.UID) }()
	select {
	case err := <-tornDown:
		t.Fatalf("teardown ended while a setup ran: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-tornDown; err != nil {
		t.Fatal(err)
	}
	if len(h.mnt.tornDown) != 1 || h.mnt.tornDown[0] != pod.UID {
		t.Errorf("torn down %v", h.mnt.tornDown)
	}
	h.clock.Step(time.Hour)
	h.m.poke()
	time.Sleep(20 * time.Millisecond)
	if n := h.mnt.count("slow"); n != 1 {
		t.Errorf("a removed pod's volume was set up %d times", n)
	}
}

// A pod whose containers have all ended gives its volumes back but keeps
// its directory, and nothing of it is set up again.
func TestTearDownVolumesOfAnEndedPod(t *testing.T) {
	h := start(t)
	pod := podWith("e", v1.Volume{Name: "data"})
	if _, err := h.m.WaitForMount(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if err := h.m.TearDownVolumes(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
	h.mnt.mu.Lock()
	released, tornDown := h.mnt.released, h.mnt.tornDown
	h.mnt.mu.Unlock()
	if len(released) != 1 || released[0] != pod.UID || len(tornDown) != 0 {
		t.Errorf("volumes torn down for %v, pod directories for %v", released, tornDown)
	}
	h.m.mu.Lock()
	_, desired := h.m.desired[pod.UID]
	_, actual := h.m.actual[volKey{pod.UID, "data"}]
	h.m.mu.Unlock()
	if desired || actual {
		t.Errorf("the ended pod is still desired (%v) or set up (%v)", desired, actual)
	}
	h.clock.Step(time.Hour)
	h.m.poke()
	time.Sleep(20 * time.Millisecond)
	if n := h.mnt.count("data"); n != 1 {
		t.Errorf("an ended pod's volume was set up %d times", n)
	}
}

func TestRetryNowEndsTheBackOff(t *testing.T) {
	h := start(t)
	var fail sync.Map
	fail.Store("on", true)
	h.mnt.set("csi", func(context.Context) error {
		if v, _ := fail.Load("on"); v.(bool) {
			return errors.New("driver name x not found in the list of registered CSI drivers")
		}
		return nil
	})
	pod := podWith("n", v1.Volume{Name: "csi"})
	done := make(chan error, 1)
	go func() { _, err := h.m.WaitForMount(context.Background(), pod); done <- err }()
	// Fail a few times: the back-off grows to seconds of the fake clock,
	// which is not stepped from here on.
	h.eventually(t, "four failures", 8*time.Second, func() bool { return h.mnt.count("csi") >= 4 })
	fail.Store("on", false)
	h.m.RetryNow()
	h.eventually(t, "the wait to end without the clock moving", 0, func() bool { return len(done) == 1 })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
