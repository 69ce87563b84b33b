package pluginwatcher

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	testingclock "k8s.io/utils/clock/testing"
)

// fakePlugin serves the registration API on a socket, as
// csi-node-driver-registrar does, and keeps the statuses it is told.
type fakePlugin struct {
	registerapi.UnimplementedRegistrationServer
	info     registerapi.PluginInfo
	srv      *grpc.Server
	mu       sync.Mutex
	statuses []*registerapi.RegistrationStatus
}

func (p *fakePlugin) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &p.info, nil
}

func (p *fakePlugin) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.statuses = append(p.statuses, s)
	return &registerapi.RegistrationStatusResponse{}, nil
}

func (p *fakePlugin) lastStatus() *registerapi.RegistrationStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.statuses) == 0 {
		return nil
	}
	return p.statuses[len(p.statuses)-1]
}

// servePlugin serves a plugin of that type and name at path.
func servePlugin(t *testing.T, path, typ, name string) *fakePlugin {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	p := &fakePlugin{info: registerapi.PluginInfo{Type: typ, Name: name, Endpoint: "/plugins/" + name + "/csi.sock", SupportedVersions: []string{"1.0.0"}}}
	p.srv = grpc.NewServer()
	registerapi.RegisterRegistrationServer(p.srv, p)
	go func() { _ = p.srv.Serve(l) }()
	t.Cleanup(p.srv.Stop)
	return p
}

// fakeHandler records what it registered; Validate refuses names in refuse.
type fakeHandler struct {
	mu          sync.Mutex
	live        map[string]Info
	registers   int
	deregisters int
	refuse      string
}

func (h *fakeHandler) Validate(info Info) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if info.Name == h.refuse {
		return errors.New("unsupported versions")
	}
	return nil
}

func (h *fakeHandler) Register(_ context.Context, info Info) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.live[info.Name] = info
	h.registers++
	return nil
}

func (h *fakeHandler) Deregister(_ context.Context, info Info) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.live, info.Name)
	h.deregisters++
}

func (h *fakeHandler) state() (live map[string]Info, registers, deregisters int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	live = map[string]Info{}
	for k, v := range h.live {
		live[k] = v
	}
	return live, h.registers, h.deregisters
}

func startWatcher(t *testing.T) (string, *fakeHandler) {
	t.Helper()
	// Unix socket paths are short: t.TempDir's can exceed 108 bytes.
	dir, err := os.MkdirTemp("", "pw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	reg := filepath.Join(dir, DirName)
	h := &fakeHandler{live: map[string]Info{}, refuse: "refused"}
	w := New(Config{Dir: reg, Handlers: map[string]Handler{registerapi.CSIPlugin: h}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	eventually(t, "the registry directory", func() bool { _, err := os.Stat(reg); return err == nil })
	return reg, h
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRegistersDeregistersAndReregisters(t *testing.T) {
	reg, h := startWatcher(t)
	sock := filepath.Join(reg, "hostpath.csi.k8s.io-reg.sock")
	p := servePlugin(t, sock, registerapi.CSIPlugin, "hostpath.csi.k8s.io")
	eventually(t, "registration", func() bool { live, _, _ := h.state(); return len(live) == 1 })
	live, _, _ := h.state()
	if got := live["hostpath.csi.k8s.io"]; got.Endpoint != "/plugins/hostpath.csi.k8s.io/csi.sock" || len(got.Versions) != 1 {
		t.Errorf("registered %+v", got)
	}
	eventually(t, "the plugin told", func() bool { s := p.lastStatus(); return s != nil && s.PluginRegistered })

	// The plugin restarts: a new socket at the same path.
	p.srv.Stop()
	if err := os.Remove(sock); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	p2 := servePlugin(t, sock, registerapi.CSIPlugin, "hostpath.csi.k8s.io")
	eventually(t, "re-registration", func() bool { _, r, d := h.state(); return r == 2 && d == 1 })
	eventually(t, "the new plugin told", func() bool { s := p2.lastStatus(); return s != nil && s.PluginRegistered })

	// The socket goes: the plugin is deregistered.
	p2.srv.Stop()
	_ = os.Remove(sock)
	eventually(t, "deregistration", func() bool { live, _, d := h.state(); return len(live) == 0 && d == 2 })
}

func TestRefusedPluginsAreTold(t *testing.T) {
	reg, h := startWatcher(t)
	unknown := servePlugin(t, filepath.Join(reg, "gpu.sock"), "GPUPlugin", "gpu")
	refused := servePlugin(t, filepath.Join(reg, "refused.sock"), registerapi.CSIPlugin, "refused")
	for _, p := range []*fakePlugin{unknown, refused} {
		eventually(t, "a refusal told to "+p.info.Name, func() bool { s := p.lastStatus(); return s != nil && !s.PluginRegistered && s.Error != "" })
	}
	if live, r, _ := h.state(); len(live) != 0 || r != 0 {
		t.Errorf("refused plugins registered: %v", live)
	}
}

func TestSymlinksInTheRegistryAreNotFollowed(t *testing.T) {
	reg, h := startWatcher(t)
	outside, err := os.MkdirTemp("", "pwo")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	servePlugin(t, filepath.Join(outside, "evil.sock"), registerapi.CSIPlugin, "evil")
	if err := os.Symlink(filepath.Join(outside, "evil.sock"), filepath.Join(reg, "evil.sock")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(reg, "linkdir")); err != nil {
		t.Fatal(err)
	}
	// A real plugin in a real subdirectory is found: the scan got past
	// the symlinks.
	if err := os.Mkdir(filepath.Join(reg, "sub"), 0o750); err != nil {
		t.Fatal(err)
	}
	servePlugin(t, filepath.Join(reg, "sub", "good.sock"), registerapi.CSIPlugin, "good")
	eventually(t, "the real plugin registered", func() bool { live, _, _ := h.state(); _, ok := live["good"]; return ok })
	if live, _, _ := h.state(); len(live) != 1 {
		t.Errorf("registered through a symlink: %v", live)
	}
}

func TestOpenSocketRefusesASwappedSocket(t *testing.T) {
	dir, err := os.MkdirTemp("", "pws")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	servePlugin(t, filepath.Join(dir, "a.sock"), registerapi.CSIPlugin, "a")
	found, err := scan(dir)
	if err != nil || len(found.sockets) != 1 {
		t.Fatalf("scan %v %v", found, err)
	}
	s := found.sockets["a.sock"]
	// Swap the socket for a symlink to another socket after the scan.
	servePlugin(t, filepath.Join(dir, "b.sock"), registerapi.CSIPlugin, "b")
	if err := os.Remove(filepath.Join(dir, "a.sock")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "b.sock"), filepath.Join(dir, "a.sock")); err != nil {
		t.Fatal(err)
	}
	if fd, err := openSocket(dir, s); err == nil {
		t.Fatalf("opened a swapped socket (fd %d)", fd)
	}
}

// stepUntil steps the fake clock by step until cond holds, at most max
// steps; it returns whether cond held.
func stepUntil(clk *testingclock.FakeClock, step time.Duration, maxSteps int, cond func() bool) bool {
	for i := 0; i <= maxSteps; i++ {
		for j := 0; j < 20; j++ { // let the watcher act on the last step
			if cond() {
				return true
			}
			time.Sleep(5 * time.Millisecond)
		}
		clk.Step(step)
	}
	return false
}

func TestFailedRegistrationBacksOffAndARecreatedSocketIsTriedAtOnce(t *testing.T) {
	if backOff(1) != time.Second || backOff(3) != 4*time.Second || backOff(30) != maxRetryPeriod {
		t.Errorf("back-off does not double from 1 s to its cap: %v %v %v", backOff(1), backOff(3), backOff(30))
	}
	dir, err := os.MkdirTemp("", "pwb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	reg := filepath.Join(dir, DirName)
	h := &fakeHandler{live: map[string]Info{}, refuse: "flaky"}
	clk := testingclock.NewFakeClock(time.Unix(1e9, 0))
	w := New(Config{Dir: reg, Handlers: map[string]Handler{registerapi.CSIPlugin: h}, Clock: clk})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	eventually(t, "the registry directory", func() bool { _, err := os.Stat(reg); return err == nil })

	sock := filepath.Join(reg, "flaky.sock")
	p := servePlugin(t, sock, registerapi.CSIPlugin, "flaky")
	refusals := func() int { p.mu.Lock(); defer p.mu.Unlock(); return len(p.statuses) }
	if !stepUntil(clk, time.Second, 60, func() bool { return refusals() >= 5 }) {
		t.Fatalf("%d refusals in 60 s of back-off, want 5", refusals())
	}
	// Five failures: the next try is 16 s away. A restarted plugin with a
	// new socket is tried within a step or two, not after the back-off.
	h.mu.Lock()
	h.refuse = ""
	h.mu.Unlock()
	p.srv.Stop()
	_ = os.Remove(sock)
	p2 := servePlugin(t, sock, registerapi.CSIPlugin, "flaky")
	registered := func() bool { live, _, _ := h.state(); _, ok := live["flaky"]; return ok }
	if !stepUntil(clk, time.Second, 2, registered) {
		t.Fatal("the re-created socket waited out the old socket's back-off")
	}
	if s := p2.lastStatus(); s == nil || !s.PluginRegistered {
		t.Errorf("the restarted plugin was told %v", s)
	}
}
