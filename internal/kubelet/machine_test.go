package kubelet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	testclock "k8s.io/utils/clock/testing"
	utilexec "k8s.io/utils/exec"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/config"
	"github.com/skiff-sh/skiff/internal/cri"
	"github.com/skiff-sh/skiff/internal/kube"
	"github.com/skiff-sh/skiff/internal/podcgroups"
	"github.com/skiff-sh/skiff/internal/shutdown"
)

// The whole kubelet, in-process: New and Run over k8s.io/cri-api's fake
// runtime and client-go's fake clientset, on a fake clock with the
// production periods. Tests step the clock and poll for what they expect;
// nothing sleeps to wait.
//
// Every timer of the Kubelet's own (PLEG, pod workers, prober, status
// manager, node status, runtime manager, eviction, image GC) runs on the
// fake clock, which moves only when a test steps it. Its goroutines still
// need real time to run: between two steps a test polls its condition for
// a few milliseconds of real time, so the clock never runs far ahead of
// the work it triggers. Only the file and apiserver pod sources, driven by
// inotify and watches, run on their own.

const (
	testNode = "node-a"
	// tick is how far the fake clock moves in one step: a fifth of the
	// PLEG's relist period.
	tick = 200 * time.Millisecond
	// maxSteps bounds a wait: 10 minutes of fake time, longer than any
	// period or back-off the tests wait for.
	maxSteps = 3000
	// settle is the real time given to the Kubelet's goroutines after a
	// step, polled every pollEvery.
	settle    = 5 * time.Millisecond
	pollEvery = 250 * time.Microsecond
	// holdFor is how much fake time holds checks: several housekeeping,
	// status and node status periods.
	holdFor = 30 * time.Second
	// waitTimeout bounds real waits that no clock step can end (Run
	// returning after its context ends).
	waitTimeout = 15 * time.Second
)

// machine is one node: a fake runtime and apiserver that outlive the
// Kubelets started on them, as a real runtime outlives a restarted Skiff.
type machine struct {
	t      *testing.T
	clock  *testclock.FakeClock // every Kubelet's on the machine
	rt     *critest.FakeRuntimeService
	images *critest.FakeImageService
	client *fake.Clientset
	cg     *fakeCgroups
	root   string
	static string // staticPodPath
	// patchesDown fails every pod status patch, as an apiserver outage.
	patchesDown atomic.Bool
	// tune, when set, changes the configuration of the Kubelets started
	// after it is set.
	tune func(*kubeletconfig.KubeletConfiguration)
	// logind, when set, is the Kubelets' logind (Deps.Logind).
	logind func(context.Context) (shutdown.Logind, error)
}

func newMachine(t *testing.T) *machine {
	t.Helper()
	root := t.TempDir()
	m := &machine{
		t: t, clock: testclock.NewFakeClock(time.Now()),
		rt: critest.NewFakeRuntimeService(), images: critest.NewFakeImageService(),
		client: fake.NewClientset(), cg: &fakeCgroups{pods: map[types.UID]bool{}},
		root: root, static: filepath.Join(root, "manifests"),
	}
	m.rt.FakeStatus = &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true}, {Type: runtimeapi.NetworkReady, Status: true},
	}}
	if err := os.MkdirAll(m.static, 0o755); err != nil {
		t.Fatal(err)
	}
	// The apiserver gives every new object a UID; the fake does not.
	m.client.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if obj, err := meta.Accessor(a.(k8stesting.CreateAction).GetObject()); err == nil && obj.GetUID() == "" {
			obj.SetUID(uuid.NewUUID())
			obj.SetCreationTimestamp(metav1.NewTime(m.clock.Now()))
		}
		return false, nil, nil
	})
	m.client.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if m.patchesDown.Load() {
			return true, nil, fmt.Errorf("apiserver unavailable")
		}
		return false, nil, nil
	})
	return m
}

// start builds a Kubelet on the machine and runs it until the test ends
// or the returned stop is called.
func (m *machine) start() (k *Kubelet, stop func()) {
	m.t.Helper()
	return m.startWith(m.client)
}

// startStandalone starts a Kubelet with no apiserver.
func (m *machine) startStandalone() (k *Kubelet, stop func()) {
	m.t.Helper()
	return m.startWith(nil)
}

func (m *machine) startWith(client kube.Interface) (k *Kubelet, stop func()) {
	m.t.Helper()
	kc := &kubeletconfig.KubeletConfiguration{}
	config.SetDefaults(kc)
	kc.ReadOnlyPort = 0
	kc.HealthzPort = ptr.To[int32](0)
	kc.EnableServer = ptr.To(false)
	kc.StaticPodPath = m.static
	// The file source watches with inotify and polls on the real clock.
	kc.FileCheckFrequency = metav1.Duration{Duration: 50 * time.Millisecond}
	kc.PodLogsDir = filepath.Join(m.root, "logs")
	kc.LocalStorageCapacityIsolation = ptr.To(false)
	if m.tune != nil {
		m.tune(kc)
	}
	k, err := New(Deps{
		Config: Config{Kubelet: kc, NodeName: testNode, RootDir: filepath.Join(m.root, "kubelet"),
			DevicePluginDir: filepath.Join(m.root, "device-plugins")},
		CRI:    &cri.Client{Runtime: m.rt, Images: m.images, RuntimeName: "fake", RuntimeVersion: "0.1.0"},
		Client: client, Cgroups: m.cg, HostIPs: []string{"10.0.0.1"}, Clock: m.clock, Logind: m.logind,
	})
	if err != nil {
		m.t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					m.t.Errorf("Run: %v", err)
				}
			case <-time.After(waitTimeout):
				m.t.Error("Run did not return after its context ended")
			}
		})
	}
	m.t.Cleanup(stop)
	return k, stop
}

// forgotten reports whether the Kubelet keeps nothing of the pod: no
// record, no status, no worker, no cgroup, no metric series.
func (m *machine) forgotten(k *Kubelet, uid types.UID) bool {
	_, hasStatus := k.statuses.Status(uid)
	return !k.records.has(uid) && !hasStatus && !k.workers.Has(uid) && !m.cg.has(uid) && metricSeries(m.t, k, uid) == 0
}

// metricSeries counts the series the Kubelet's /metrics and
// /metrics/probes show with the pod's UID as a label.
func metricSeries(t *testing.T, k *Kubelet, uid types.UID) int {
	families, err := k.cfg.Metrics.Gatherers().Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range families {
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetValue() == string(uid) {
					n++
				}
			}
		}
	}
	return n
}

// histogramCount is how many observations the Kubelet's histogram has.
func histogramCount(t *testing.T, k *Kubelet, name string) uint64 {
	families, err := k.cfg.Metrics.Gatherers().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, f := range families {
		if f.GetName() == name {
			for _, s := range f.GetMetric() {
				n += s.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}

// eventually steps the fake clock until cond holds, failing the test
// after maxSteps steps.
func (m *machine) eventually(what string, cond func() bool) {
	m.t.Helper()
	m.within((maxSteps-1)*tick, what, cond)
}

// within steps the fake clock until cond holds, looking at most d of
// fake time on, and fails the test if it never does.
func (m *machine) within(d time.Duration, what string, cond func() bool) {
	m.t.Helper()
	for elapsed := time.Duration(0); elapsed <= d; elapsed += tick {
		if m.settle(cond) {
			return
		}
		m.clock.Step(tick)
	}
	m.t.Fatalf("%s: not so after %v of fake time", what, d+tick)
}

// holds checks that cond stays true while the fake clock moves on by
// holdFor.
func (m *machine) holds(what string, cond func() bool) {
	m.t.Helper()
	broken := func() bool { return !cond() }
	for elapsed := time.Duration(0); elapsed < holdFor; elapsed += tick {
		if m.settle(broken) {
			m.t.Fatalf("%s stopped holding %v into the check", what, elapsed)
		}
		m.clock.Step(tick)
	}
}

// settle gives the Kubelet's goroutines up to settle of real time to act
// on the last step of the clock, polling cond; true once cond holds.
func (m *machine) settle(cond func() bool) bool {
	if cond() {
		return true
	}
	err := wait.PollUntilContextTimeout(context.Background(), pollEvery, settle, false,
		func(context.Context) (bool, error) { return cond(), nil })
	return err == nil
}

func (m *machine) createPod(p *v1.Pod) {
	m.t.Helper()
	if _, err := m.client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		m.t.Fatalf("create pod: %v", err)
	}
}

// apiPod is the apiserver's copy of the pod; nil when there is none.
func (m *machine) apiPod(name string) *v1.Pod {
	p, err := m.client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return p
}

// waitPod waits until the apiserver's copy of the pod satisfies ok.
func (m *machine) waitPod(name, what string, ok func(*v1.Pod) bool) *v1.Pod {
	m.t.Helper()
	var p *v1.Pod
	m.eventually(name+" "+what, func() bool {
		p = m.apiPod(name)
		return p != nil && ok(p)
	})
	return p
}

// deletePod does what the apiserver does on a graceful delete: it sets
// the deletion timestamp and grace period and leaves the rest to the
// kubelet.
func (m *machine) deletePod(name string) {
	m.t.Helper()
	p := m.apiPod(name)
	if p == nil {
		m.t.Fatalf("no pod %s to delete", name)
	}
	p.DeletionTimestamp = ptr.To(metav1.NewTime(m.clock.Now()))
	p.DeletionGracePeriodSeconds = ptr.To[int64](1)
	if _, err := m.client.CoreV1().Pods(p.Namespace).Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		m.t.Fatalf("delete pod: %v", err)
	}
}

// containers are the runtime's containers of the pod, by name.
func (m *machine) containers(uid types.UID) []*runtimeapi.Container {
	cs, err := m.rt.ListContainers(context.Background(), &runtimeapi.ContainerFilter{
		LabelSelector: map[string]string{cri.PodUIDLabel: string(uid)},
	})
	if err != nil {
		m.t.Fatal(err)
	}
	return cs
}

// sandboxes are the runtime's sandboxes of the pod.
func (m *machine) sandboxes(uid types.UID) []*runtimeapi.PodSandbox {
	sbs, err := m.rt.ListPodSandbox(context.Background(), &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{cri.PodUIDLabel: string(uid)},
	})
	if err != nil {
		m.t.Fatal(err)
	}
	return sbs
}

// calls counts the CRI calls of that name so far.
func (m *machine) calls(name string) int {
	n := 0
	for _, c := range m.rt.GetCalls() {
		if c == name {
			n++
		}
	}
	return n
}

func running(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodRunning && len(p.Status.ContainerStatuses) == 1 &&
		p.Status.ContainerStatuses[0].State.Running != nil
}

// newPod is a pod bound to the node, with the defaults the apiserver
// would fill in (the fake clientset fills in none).
func newPod(name string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1.PodSpec{
			NodeName:                      testNode,
			RestartPolicy:                 v1.RestartPolicyAlways,
			DNSPolicy:                     v1.DNSClusterFirst,
			EnableServiceLinks:            ptr.To(true),
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []v1.Container{{
				Name: "app", Image: "busybox:test", ImagePullPolicy: v1.PullIfNotPresent,
				TerminationMessagePath: v1.TerminationMessagePathDefault, TerminationMessagePolicy: v1.TerminationMessageReadFile,
			}},
		},
	}
}

// fakeCgroups records which pods have a cgroup.
type fakeCgroups struct {
	mu   sync.Mutex
	pods map[types.UID]bool
}

func (f *fakeCgroups) PodCgroupParent(*v1.Pod) string { return "" }

func (f *fakeCgroups) ContainerResources(*v1.Pod, *v1.Container) *runtimeapi.LinuxContainerResources {
	return nil
}

func (f *fakeCgroups) EnsurePod(p *v1.Pod) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pods[p.UID] = true
	return nil
}

func (f *fakeCgroups) RemovePod(uid types.UID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.pods, uid)
	return nil
}

func (f *fakeCgroups) PodUIDs() ([]types.UID, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []types.UID
	for uid := range f.pods {
		out = append(out, uid)
	}
	slices.Sort(out)
	return out, nil
}

// The pod cgroup during a resize: nothing to set, so only the
// containers' updates show.
func (f *fakeCgroups) PodLimits(*v1.Pod) podcgroups.Limits             { return podcgroups.Limits{} }
func (f *fakeCgroups) SetPodSetting(*v1.Pod, podcgroups.Setting) error { return nil }
func (f *fakeCgroups) PodMemoryUsage(*v1.Pod) (int64, error)           { return 0, nil }

func (f *fakeCgroups) has(uid types.UID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pods[uid]
}

// exitError is what ExecSync returns for a command that exited non-zero.
func exitError(code int) error {
	return utilexec.CodeExitError{Err: fmt.Errorf("command exited %d", code), Code: code}
}

// runInRuntime starts the pod's sandbox and containers straight in the
// runtime, labelled as Skiff labels them, as a Skiff no longer running
// would have left them.
func (m *machine) runInRuntime(p *v1.Pod) {
	m.t.Helper()
	ctx := context.Background()
	sbc := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: p.Name, Namespace: p.Namespace, Uid: string(p.UID)},
		Labels:   cri.SandboxLabels(p),
	}
	id, err := m.rt.RunPodSandbox(ctx, sbc, "")
	if err != nil {
		m.t.Fatal(err)
	}
	for _, c := range p.Spec.Containers {
		cid, err := m.rt.CreateContainer(ctx, id, &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: c.Name},
			Image:    &runtimeapi.ImageSpec{Image: c.Image},
			Labels:   cri.ContainerLabels(p, c.Name),
		}, sbc)
		if err != nil {
			m.t.Fatal(err)
		}
		if err := m.rt.StartContainer(ctx, cid); err != nil {
			m.t.Fatal(err)
		}
	}
}
