package podruntime

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	testclock "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/cri"
	"github.com/skiff-sh/skiff/internal/volume"
)

type fixture struct {
	t     *testing.T
	rt    *critest.FakeRuntimeService
	img   *critest.FakeImageService
	m     *Manager
	clock *testclock.FakeClock
	pod   *v1.Pod
}

func newFixture(t *testing.T, policy v1.RestartPolicy, init ...v1.Container) *fixture {
	rt, img := critest.NewFakeRuntimeService(), critest.NewFakeImageService()
	img.SetFakeImages([]string{"pause:1", "busybox:1"})
	clock := testclock.NewFakeClock(time.Now())
	enableServiceLinks := true
	m := New(Config{
		CRI:        &cri.Client{Runtime: rt, Images: img, RuntimeName: "fake"},
		PodLogsDir: t.TempDir(),
		Clock:      clock,
	})
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: types.UID("uid-1")},
		Spec: v1.PodSpec{
			RestartPolicy:      policy,
			InitContainers:     init,
			EnableServiceLinks: &enableServiceLinks,
			Containers: []v1.Container{{
				Name: "app", Image: "busybox:1", ImagePullPolicy: v1.PullIfNotPresent,
				Command: []string{"sh", "-c", "echo $(GREETING)"},
				Env:     []v1.EnvVar{{Name: "GREETING", Value: "hi"}},
			}},
		},
	}
	return &fixture{t: t, rt: rt, img: img, m: m, clock: clock, pod: pod}
}

func (f *fixture) status() *container.PodStatus {
	f.t.Helper()
	st, err := f.m.GetPodStatus(context.Background(), cri.PodRef{UID: f.pod.UID, Name: "p", Namespace: "ns"})
	if err != nil {
		f.t.Fatalf("GetPodStatus: %v", err)
	}
	return st
}

func (f *fixture) sync() SyncResult {
	return f.m.SyncPod(context.Background(), f.pod, f.status(), nil)
}

// exit makes the newest instance of the named container exit now.
func (f *fixture) exit(name string, code int32) {
	f.t.Helper()
	cs := f.status().FindContainer(name)
	if cs == nil {
		f.t.Fatalf("no container %q", name)
	}
	f.rt.Lock()
	c := f.rt.Containers[cs.ID]
	c.State = runtimeapi.ContainerState_CONTAINER_EXITED
	c.ExitCode = code
	c.FinishedAt = f.clock.Now().UnixNano()
	f.rt.Unlock()
}

func TestSyncStartsSandboxAndContainer(t *testing.T) {
	f := newFixture(t, v1.RestartPolicyAlways)
	res := f.sync()
	if res.Err != nil || len(res.Waiting) > 0 || !res.Started {
		t.Fatalf("sync: err=%v waiting=%v started=%v", res.Err, res.Waiting, res.Started)
	}
	st := f.status()
	if !st.SandboxReady() || len(st.IPs) == 0 {
		t.Fatalf("sandbox not ready or no IP: %+v", st)
	}
	app := st.FindContainer("app")
	if app == nil || app.State != container.StateRunning || app.RestartCount != 0 {
		t.Fatalf("app container: %+v", app)
	}
	f.rt.Lock()
	cfg := f.rt.Containers[app.ID]
	f.rt.Unlock()
	if got := cfg.Annotations[cri.ContainerRestartCountAnnotation]; got != "0" {
		t.Errorf("restartCount annotation = %q", got)
	}
	if cfg.Labels[cri.PodUIDLabel] != "uid-1" || cfg.Labels[cri.ContainerNameLabel] != "app" {
		t.Errorf("labels = %v", cfg.Labels)
	}
	// A second sync with nothing changed does nothing.
	before := len(f.rt.GetCalls())
	if f.sync().Started {
		t.Error("an idle sync reports a container started")
	}
	for _, c := range f.rt.GetCalls()[before:] {
		if c == "CreateContainer" || c == "RunPodSandbox" || c == "StopContainer" {
			t.Errorf("idle sync called %s", c)
		}
	}
}

func TestCrashLoopBacksOff(t *testing.T) {
	f := newFixture(t, v1.RestartPolicyAlways)
	f.sync()
	f.exit("app", 1)
	// First restart is immediate, as upstream.
	if res := f.sync(); len(res.Waiting) > 0 {
		t.Fatalf("first restart waited: %v", res.Waiting)
	}
	if got := f.status().FindContainer("app"); got.State != container.StateRunning || got.RestartCount != 1 {
		t.Fatalf("after first restart: %+v", got)
	}
	f.exit("app", 1)
	res := f.sync()
	w := res.Waiting["app"]
	if w == nil || w.Reason != ReasonCrashLoopBackOff {
		t.Fatalf("want CrashLoopBackOff, got %+v", w)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > backOffInitial {
		t.Errorf("requeue after %v, want (0, 10s]", res.RequeueAfter)
	}
	f.clock.Step(backOffInitial + time.Second)
	if res := f.sync(); len(res.Waiting) > 0 {
		t.Fatalf("still waiting after back-off: %v", res.Waiting)
	}
	if got := f.status().FindContainer("app"); got.RestartCount != 2 {
		t.Fatalf("restartCount = %d, want 2", got.RestartCount)
	}
	// The next back-off doubles.
	f.exit("app", 1)
	if res := f.sync(); res.RequeueAfter <= backOffInitial {
		t.Errorf("second back-off %v, want > 10s", res.RequeueAfter)
	}
	// The newest instance and one dead instance besides are kept.
	var kept []int
	for _, c := range f.status().Instances("app") {
		kept = append(kept, c.RestartCount)
	}
	if len(kept) != 2 || kept[0] != 2 || kept[1] != 1 {
		t.Errorf("instances kept (restart counts, newest first) = %v, want [2 1]", kept)
	}
}

func TestRestartPolicies(t *testing.T) {
	for _, tc := range []struct {
		policy  v1.RestartPolicy
		code    int32
		restart bool
	}{
		{v1.RestartPolicyNever, 1, false},
		{v1.RestartPolicyNever, 0, false},
		{v1.RestartPolicyOnFailure, 0, false},
		{v1.RestartPolicyOnFailure, 2, true},
		{v1.RestartPolicyAlways, 0, true},
	} {
		f := newFixture(t, tc.policy)
		f.sync()
		f.exit("app", tc.code)
		f.sync()
		got := f.status().FindContainer("app")
		if restarted := got.RestartCount == 1 && got.State == container.StateRunning; restarted != tc.restart {
			t.Errorf("%s exit %d: restarted=%v, want %v", tc.policy, tc.code, restarted, tc.restart)
		}
	}
}

func TestInitContainersRunInOrder(t *testing.T) {
	f := newFixture(t, v1.RestartPolicyAlways,
		v1.Container{Name: "init1", Image: "busybox:1"},
		v1.Container{Name: "init2", Image: "busybox:1"})
	f.sync()
	st := f.status()
	if st.FindContainer("init1") == nil || st.FindContainer("init2") != nil || st.FindContainer("app") != nil {
		t.Fatalf("first sync should start init1 only: %+v", st.Containers)
	}
	f.sync() // init1 still running: nothing new
	if f.status().FindContainer("init2") != nil {
		t.Fatal("init2 started while init1 runs")
	}
	f.exit("init1", 0)
	f.sync()
	if st := f.status(); st.FindContainer("init2") == nil || st.FindContainer("app") != nil {
		t.Fatalf("after init1: %+v", st.Containers)
	}
	f.exit("init2", 0)
	f.sync()
	if app := f.status().FindContainer("app"); app == nil || app.State != container.StateRunning {
		t.Fatalf("app not running after init: %+v", app)
	}
}

func TestFailedInitWithNeverStopsThere(t *testing.T) {
	f := newFixture(t, v1.RestartPolicyNever, v1.Container{Name: "init1", Image: "busybox:1"})
	f.sync()
	f.exit("init1", 3)
	f.sync()
	st := f.status()
	if st.FindContainer("app") != nil || len(st.Instances("init1")) != 1 {
		t.Fatalf("failed init with Never must not go on: %+v", st.Containers)
	}
}

func TestKillAndRemovePod(t *testing.T) {
	f := newFixture(t, v1.RestartPolicyAlways)
	f.sync()
	if err := f.m.KillPod(context.Background(), f.pod, f.status(), nil); err != nil {
		t.Fatal(err)
	}
	st := f.status()
	if st.SandboxReady() || st.FindContainer("app").State != container.StateExited {
		t.Fatalf("after kill: %+v", st)
	}
	if err := f.m.RemovePod(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	if st := f.status(); len(st.Containers) != 0 || len(st.Sandboxes) != 0 {
		t.Fatalf("after remove: %+v", st)
	}
}

func TestPullNeverMissingImage(t *testing.T) {
	f := newFixture(t, v1.RestartPolicyAlways)
	f.pod.Spec.Containers[0].Image = "missing:1"
	f.pod.Spec.Containers[0].ImagePullPolicy = v1.PullNever
	res := f.sync()
	if w := res.Waiting["app"]; w == nil || w.Reason != ReasonErrImageNeverPull {
		t.Fatalf("want ErrImageNeverPull, got %+v", res.Waiting)
	}
}

func TestContainerConfig(t *testing.T) {
	f := newFixture(t, v1.RestartPolicyAlways)
	c := &f.pod.Spec.Containers[0]
	c.Args = []string{"$(GREETING)-$(UNSET)", "$$(GREETING)"}
	c.Env = append(c.Env, v1.EnvVar{Name: "COMBINED", Value: "$(GREETING) there"},
		v1.EnvVar{Name: "POD", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}})
	cfg, cerr := f.m.containerConfig(context.Background(), f.pod, c, 3, "sha256:abc", []string{"10.0.0.5"}, nil)
	if cerr != nil {
		t.Fatal(cerr)
	}
	if cfg.LogPath != "app/3.log" || cfg.Metadata.Attempt != 3 {
		t.Errorf("log path %q attempt %d", cfg.LogPath, cfg.Metadata.Attempt)
	}
	if got := cfg.Command[2]; got != "echo hi" {
		t.Errorf("command = %q", got)
	}
	if cfg.Args[0] != "hi-$(UNSET)" || cfg.Args[1] != "$(GREETING)" {
		t.Errorf("args = %q", cfg.Args)
	}
	env := map[string]string{}
	for _, kv := range cfg.Envs {
		env[kv.Key] = kv.Value
	}
	if env["COMBINED"] != "hi there" || env["POD"] != "p" {
		t.Errorf("env = %v", env)
	}
	if cfg.Image.Image != "sha256:abc" || cfg.Image.UserSpecifiedImage != "busybox:1" {
		t.Errorf("image = %+v", cfg.Image)
	}
	// Mounts: the prepared volume, a subPathExpr from env, and refusals.
	vol := t.TempDir()
	vols := map[string]volume.Mounted{"v": {HostPath: vol}}
	c.VolumeMounts = []v1.VolumeMount{
		{Name: "v", MountPath: "/v", ReadOnly: true},
		{Name: "v", MountPath: "/sub", SubPathExpr: "$(GREETING)"},
	}
	if _, cerr := f.m.containerConfig(context.Background(), f.pod, c, 0, "x", nil, vols); cerr == nil || cerr.Reason != ReasonCreateContainerConfig {
		t.Errorf("a subPath with no pod directory to bind it under must be refused visibly, got %v", cerr)
	}
	podDir := t.TempDir()
	f.m.cfg.PodDir = func(types.UID) string { return podDir }
	target := volume.SubPathTarget(podDir, "v", c.Name, 1)
	t.Cleanup(func() { _ = unix.Unmount(target, unix.MNT_DETACH) })
	cfg, cerr = f.m.containerConfig(context.Background(), f.pod, c, 0, "x", nil, vols)
	if cerr != nil {
		t.Fatal(cerr)
	}
	if len(cfg.Mounts) < 2 || cfg.Mounts[0].HostPath != vol || !cfg.Mounts[0].Readonly ||
		cfg.Mounts[1].HostPath != target || cfg.Mounts[1].ContainerPath != "/sub" {
		t.Errorf("mounts = %+v", cfg.Mounts)
	}
	// The subPath reaches the runtime as a bind mount of the expanded
	// path's directory, made by Skiff.
	var want, got unix.Stat_t
	if err := unix.Stat(vol+"/hi", &want); err != nil {
		t.Fatalf("the subPathExpr directory was not created: %v", err)
	}
	if err := unix.Stat(target, &got); err != nil || got.Ino != want.Ino || got.Dev != want.Dev {
		t.Errorf("%s is not a bind mount of %s/hi: %v", target, vol, err)
	}
	c.VolumeMounts = []v1.VolumeMount{{Name: "v", MountPath: "/sub", SubPathExpr: "$(UNSET)"}}
	if _, cerr := f.m.containerConfig(context.Background(), f.pod, c, 0, "x", nil, vols); cerr == nil || cerr.Message != "missing value for UNSET" {
		t.Errorf("a subPathExpr naming an unset variable must be refused as upstream, got %v", cerr)
	}
	c.VolumeMounts = []v1.VolumeMount{{Name: "missing", MountPath: "/m"}}
	if _, cerr := f.m.containerConfig(context.Background(), f.pod, c, 0, "x", nil, vols); cerr == nil || cerr.Reason != ReasonCreateContainerConfig {
		t.Errorf("a mount of an unprepared volume must be refused visibly, got %v", cerr)
	}
}

func TestGracePeriod(t *testing.T) {
	g := func(v int64) *int64 { return &v }
	pod := &v1.Pod{Spec: v1.PodSpec{TerminationGracePeriodSeconds: g(30)}}
	if got := GracePeriod(pod, nil); got != 30 {
		t.Errorf("spec: %d", got)
	}
	pod.DeletionGracePeriodSeconds = g(5)
	if got := GracePeriod(pod, nil); got != 5 {
		t.Errorf("deletion: %d", got)
	}
	if got := GracePeriod(pod, g(0)); got != minGracePeriod {
		t.Errorf("override 0: %d, want %d", got, minGracePeriod)
	}
}

// The runtime runs the sandbox with its own configured image, as upstream
// 1.34: Skiff neither checks for nor pulls any pause image, so a runtime
// that has only the app's image runs the pod.
func TestSandboxNeedsNoImageFromSkiff(t *testing.T) {
	f := newFixture(t, v1.RestartPolicyAlways)
	f.img.SetFakeImages([]string{"busybox:1"})
	if res := f.sync(); res.Err != nil || !res.Started {
		t.Fatalf("sync: err=%v waiting=%v started=%v", res.Err, res.Waiting, res.Started)
	}
	if !f.status().SandboxReady() {
		t.Fatal("sandbox not ready")
	}
	f.img.Lock()
	defer f.img.Unlock()
	for _, c := range f.img.Called {
		if c == "PullImage" {
			t.Errorf("an image was pulled (calls %v)", f.img.Called)
		}
	}
	if len(f.img.Images) != 1 || f.img.Images["busybox:1"] == nil {
		t.Errorf("images after sync: %v, want only busybox:1", f.img.Images)
	}
}

// A sandbox made but unusable is rolled back; what fails in the roll-back
// is returned with the error that caused it, not dropped.
func TestUnusableSandboxRollbackErrorsAreJoined(t *testing.T) {
	f := newFixture(t, v1.RestartPolicyAlways)
	statusErr, removeErr := errors.New("status refused"), errors.New("remove refused")
	f.rt.InjectError("PodSandboxStatus", statusErr)
	f.rt.InjectError("RemovePodSandbox", removeErr)
	res := f.sync()
	if !errors.Is(res.Err, statusErr) || !errors.Is(res.Err, removeErr) {
		t.Fatalf("sync error %v, want both the status and the roll-back error", res.Err)
	}
	if n := len(f.rt.Sandboxes); n != 1 {
		t.Fatalf("%d sandboxes, want the one whose removal failed", n)
	}
	// The next sync removes nothing more and makes a working sandbox.
	if res := f.sync(); res.Err != nil || !res.Started {
		t.Fatalf("second sync: err=%v started=%v", res.Err, res.Started)
	}
}

// A runtime that lost every instance of a container (a wiped root) does
// not start its count again at 0: the log directory says how far it got.
func TestRestartCountFromLogsWhenTheRuntimeForgot(t *testing.T) {
	f := newFixture(t, v1.RestartPolicyAlways)
	dir := filepath.Join(PodLogsDir(f.m.cfg.PodLogsDir, "ns", "p", "uid-1"), "app")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"0.log", "4.log.20261127-101010.gz", "2.log", "notes.txt", "x.log", "7.logs"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "9.log"), 0o755); err != nil {
		t.Fatal(err)
	}
	f.sync()
	app := f.status().FindContainer("app")
	if app == nil || app.RestartCount != 5 {
		t.Fatalf("app container: %+v, want restart count 5", app)
	}
	f.rt.Lock()
	cfg := f.rt.Containers[app.ID]
	f.rt.Unlock()
	if cfg.Metadata.Attempt != 5 {
		t.Errorf("attempt %d, want 5", cfg.Metadata.Attempt)
	}
}
