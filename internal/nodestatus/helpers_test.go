package nodestatus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

const (
	gi = int64(1) << 30
	mi = int64(1) << 20
)

// fakeRuntime is a CRI runtime whose answers tests change.
type fakeRuntime struct {
	mu         sync.Mutex
	statusErr  error
	network    bool
	runtimeOK  bool
	cidrs      []string
	cidrErr    error
	versionErr error
}

func newFakeRuntime() *fakeRuntime { return &fakeRuntime{network: true, runtimeOK: true} }

func (f *fakeRuntime) Status(context.Context, bool) (*runtimeapi.StatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.statusErr != nil {
		return nil, f.statusErr
	}
	cond := func(t string, ok bool, reason, msg string) *runtimeapi.RuntimeCondition {
		if ok {
			reason, msg = "", ""
		}
		return &runtimeapi.RuntimeCondition{Type: t, Status: ok, Reason: reason, Message: msg}
	}
	return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		cond(runtimeapi.RuntimeReady, f.runtimeOK, "RuntimeBroken", "runtime is broken"),
		cond(runtimeapi.NetworkReady, f.network, "NetworkPluginNotReady", "Network plugin returns error: cni plugin not initialized"),
	}}}, nil
}

func (f *fakeRuntime) Version(context.Context, string) (*runtimeapi.VersionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.versionErr != nil {
		return nil, f.versionErr
	}
	return &runtimeapi.VersionResponse{RuntimeName: "containerd", RuntimeVersion: "1.6.20"}, nil
}

func (f *fakeRuntime) UpdateRuntimeConfig(_ context.Context, cfg *runtimeapi.RuntimeConfig) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cidrs = append(f.cidrs, cfg.GetNetworkConfig().GetPodCidr())
	return f.cidrErr
}

func (f *fakeRuntime) set(fn func(*fakeRuntime)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeRuntime) podCIDRCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.cidrs...)
}

// recorder collects events.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) Eventf(_ runtime.Object, eventtype, reason, format string, args ...interface{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, eventtype+" "+reason+": "+fmt.Sprintf(format, args...))
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.events
	r.events = nil
	return e
}

// kubeletConfig is a defaulted configuration as internal/config leaves it.
func kubeletConfig() *kubeletconfigv1beta1.KubeletConfiguration {
	return &kubeletconfigv1beta1.KubeletConfiguration{
		MaxPods:                       110,
		Port:                          10250,
		NodeStatusUpdateFrequency:     metav1.Duration{Duration: 10 * time.Second},
		NodeStatusReportFrequency:     metav1.Duration{Duration: 5 * time.Minute},
		NodeLeaseDurationSeconds:      40,
		RegisterNode:                  ptr.To(true),
		EnableControllerAttachDetach:  ptr.To(true),
		LocalStorageCapacityIsolation: ptr.To(true),
		EvictionHard: map[string]string{
			"memory.available":  "100Mi",
			"nodefs.available":  "10%",
			"nodefs.inodesFree": "5%",
			"imagefs.available": "15%",
		},
	}
}

// testMachine is a 4-CPU, 8 GiB machine with 512 2Mi huge pages and a
// 100 GiB root filesystem.
func testMachine() *machine {
	return &machine{
		numCPU:        4,
		memoryBytes:   8 * gi,
		hugePages:     map[int64]int64{2 * mi: 512, gi: 0},
		machineID:     "machine-id",
		systemUUID:    "system-uuid",
		bootID:        "boot-1",
		kernelVersion: "6.1.0-test",
		osImage:       "Debian GNU/Linux 12 (bookworm)",
	}
}

type testEnv struct {
	c      *Controller
	rt     *fakeRuntime
	clock  *testingclock.FakeClock
	events *recorder
}

// newTestController builds a Controller on a fake machine; mutate adjusts
// the Config before New.
func newTestController(t *testing.T, client Client, mutate func(*Config)) *testEnv {
	t.Helper()
	env := &testEnv{rt: newFakeRuntime(), clock: testingclock.NewFakeClock(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)), events: &recorder{}}
	cfg := Config{
		Client:     client,
		NodeName:   "node-a",
		Kubelet:    kubeletConfig(),
		NodeLabels: map[string]string{"tier": "gold"},
		RootDir:    t.TempDir(),
		Runtime:    env.rt,
		Clock:      env.clock,
		Recorder:   env.events,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	c.machine = testMachine()
	c.rootFS = func() (int64, error) { return 100 * gi, nil }
	c.addresses = func(context.Context) ([]v1.NodeAddress, error) {
		return []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.10"}, {Type: v1.NodeHostName, Address: "node-a"}}, nil
	}
	capacity := c.capacity()
	c.allocatable = allocatable(capacity, c.res.reserved(capacity))
	env.c = c
	return env
}

// realClock swaps the controller to the real clock (for tests of Run).
func (e *testEnv) realClock() {
	e.c.clock = clock.RealClock{}
	e.c.runtime.clock = clock.RealClock{}
}

func q(s string) resource.Quantity { return resource.MustParse(s) }

// patches counts the status patches sent to the fake clientset.
func patches(actions []k8stesting.Action) int {
	n := 0
	for _, a := range actions {
		if a.GetVerb() == "patch" && a.GetResource().Resource == "nodes" && a.GetSubresource() == "status" {
			n++
		}
	}
	return n
}

func condition(t *testing.T, n *v1.Node, typ v1.NodeConditionType) v1.NodeCondition {
	t.Helper()
	c := findCondition(n, typ)
	if c == nil {
		t.Fatalf("node has no %s condition: %+v", typ, n.Status.Conditions)
	}
	return *c
}

var errDown = errors.New("rpc error: code = Unavailable desc = connection refused")

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
