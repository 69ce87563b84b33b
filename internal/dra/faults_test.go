package dra

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/skiff-sh/skiff/internal/pluginwatcher"
)

// A driver that never answers gives the pod the call's deadline error,
// naming the driver; while it hangs, a pod whose claim is another
// driver's is prepared, and a pod without claims passes.
func TestHungDriverBlocksOnlyItsPods(t *testing.T) {
	hungPod, okPod := podWithClaim("hung", "c-hung"), podWithClaim("ok", "c-ok")
	other := claim("c-ok", okPod)
	other.Status.Allocation.Devices.Results[0].Driver = "other.example.com"
	claims := fakeClaims{"ns/c-hung": claim("c-hung", hungPod), "ns/c-ok": other}
	d := NewDrivers(DriversConfig{CallTimeout: 3 * time.Second})
	hung := startFakeDriver(t, d, driverName, drapbv1.DRAPluginService)
	hung.mu.Lock()
	hung.hang = make(chan struct{})
	hung.mu.Unlock()
	defer close(hung.hang)
	ok := startFakeDriver(t, d, "other.example.com", drapbv1.DRAPluginService)
	m, err := New(Config{Dir: t.TempDir(), Claims: claims, Drivers: d})
	if err != nil {
		t.Fatal(err)
	}

	hungErr := make(chan error, 1)
	go func() { hungErr <- m.Prepare(context.Background(), hungPod) }()
	waitUntil(t, "the hung driver called", func() bool {
		hung.mu.Lock()
		defer hung.mu.Unlock()
		return hung.hangs == 1
	})
	if err := m.Prepare(context.Background(), okPod); err != nil {
		t.Fatalf("a pod of another driver, while one hangs: %v", err)
	}
	if n, _ := ok.calls("uid-c-ok"); n != 1 {
		t.Fatalf("the other driver prepared %d times, want 1", n)
	}
	if err := m.Prepare(context.Background(), &v1.Pod{}); err != nil {
		t.Fatalf("a pod without claims: %v", err)
	}
	select {
	case err := <-hungErr:
		t.Fatalf("the hung call ended before the other pods were served: %v", err)
	default:
	}
	err = <-hungErr
	if err == nil || !strings.Contains(err.Error(), driverName) || !strings.Contains(err.Error(), "DeadlineExceeded") {
		t.Fatalf("Prepare on a hung driver: %v, want the deadline error naming the driver", err)
	}
	if got := m.WaitingFor(driverName); !slices.Equal(got, []types.UID{hungPod.UID}) {
		t.Fatalf("pods waiting for the hung driver: %v, want [%s]", got, hungPod.UID)
	}
}

// A driver's per-claim error reaches the pod with the driver's name.
func TestDriverErrorNamesDriver(t *testing.T) {
	pod := podWithClaim("p", "c1")
	m, f := newTestManager(t, t.TempDir(), fakeClaims{"ns/c1": claim("c1", pod)}, drapbv1.DRAPluginService)
	f.mu.Lock()
	f.fail = "failed to write CDI file: not a directory"
	f.mu.Unlock()
	err := m.Prepare(context.Background(), pod)
	if err == nil || !strings.Contains(err.Error(), "DRA driver "+driverName) || !strings.Contains(err.Error(), f.fail) {
		t.Fatalf("Prepare: %v, want the driver's name and message", err)
	}
}

// Pods whose claims wait for a driver not registered yet are named by
// WaitingFor, and are no longer once their claims are prepared.
func TestWaitingForDriver(t *testing.T) {
	a, b := podWithClaim("a", "c1"), podWithClaim("b", "c1")
	claims := fakeClaims{"ns/c1": claim("c1", a, b)}
	var registered []string
	d := NewDrivers(DriversConfig{Registered: func(name string) { registered = append(registered, name) }})
	m, err := New(Config{Dir: t.TempDir(), Claims: claims, Drivers: d})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*v1.Pod{a, b} {
		if err := m.Prepare(context.Background(), p); err == nil || !strings.Contains(err.Error(), "is not registered") {
			t.Fatalf("Prepare before the driver registered: %v", err)
		}
	}
	if got := m.WaitingFor(driverName); !slices.Equal(got, []types.UID{a.UID, b.UID}) {
		t.Fatalf("waiting for the driver: %v, want both pods", got)
	}
	if got := m.WaitingFor("other.example.com"); len(got) != 0 {
		t.Fatalf("waiting for another driver: %v, want none", got)
	}
	startFakeDriver(t, d, driverName, drapbv1.DRAPluginService)
	if !slices.Equal(registered, []string{driverName}) {
		t.Fatalf("Registered told %v, want the driver", registered)
	}
	if err := m.Prepare(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if got := m.WaitingFor(driverName); len(got) != 0 {
		t.Fatalf("waiting after the claim was prepared: %v, want none", got)
	}
}

// availability records what Drivers told Available, in order.
type availability struct {
	mu   sync.Mutex
	seen []string
}

func (a *availability) record(name string, usable bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seen = append(a.seen, name+map[bool]string{true: " up", false: " down"}[usable])
}

func (a *availability) last() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.seen) == 0 {
		return ""
	}
	return a.seen[len(a.seen)-1]
}

// A driver is usable once its socket is connected, not when the
// connection ends (the driver died with its registration left behind),
// usable again when it comes back, and not once deregistered.
func TestDriverAvailabilityFollowsConnection(t *testing.T) {
	av := &availability{}
	d := NewDrivers(DriversConfig{Available: av.record})
	f := startFakeDriver(t, d, driverName, drapbv1.DRAPluginService)
	waitUntil(t, "the driver connected", func() bool { return av.last() == driverName+" up" })
	f.server.Stop()
	waitUntil(t, "the driver's connection seen ended", func() bool { return av.last() == driverName+" down" })

	drv, err := d.get(driverName)
	if err != nil {
		t.Fatal(err)
	}
	serveFakeDriver(t, drv.endpoint, drapbv1.DRAPluginService)
	waitUntil(t, "the driver seen back on its socket", func() bool { return av.last() == driverName+" up" })
	d.Deregister(context.Background(), pluginwatcher.Info{Name: driverName, Endpoint: drv.endpoint})
	if got := av.last(); got != driverName+" down" {
		t.Fatalf("after deregistration: %q, want down", got)
	}
	if _, err := d.get(driverName); err == nil {
		t.Fatal("a deregistered driver is still there")
	}
}
