//go:build e2e

// Package e2e runs Skiff against a real containerd: SKIFF_CRI_ENDPOINT names
// it (make test starts one). Two kubelets on one containerd would remove
// each other's pods as orphans, so the suite runs in two groups that never
// overlap (Go runs a package's sequential tests before its parallel ones):
//   - tests that restart or reconfigure Skiff or the runtime, fill memory or
//     disk, or need node-wide figures start a Skiff of their own (newNode,
//     newClusterNode) and run first, one at a time;
//   - tests that only run pods share one Skiff joined to the control plane
//     (sharedNode, which calls t.Parallel), each in its own namespace.
package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/test/ports"
)

const (
	busybox  = "skiff.local/busybox:1.35"
	nodeName = "e2e-node"
	// testLabel marks every pod the tests make, so cleanup finds them all.
	testLabel = "skiff-e2e"
)

var (
	skiffBin    string
	criEndpoint string
	runtimeSvc  internalapi.RuntimeService
)

func TestMain(m *testing.M) {
	criEndpoint = os.Getenv("SKIFF_CRI_ENDPOINT")
	if criEndpoint == "" {
		fmt.Fprintln(os.Stderr, "SKIFF_CRI_ENDPOINT is not set: run the end-to-end tests with `make test`")
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "skiff-e2e-bin")
	if err != nil {
		panic(err)
	}
	skiffBin = filepath.Join(dir, "skiff")
	build := exec.Command("go", "build", "-o", skiffBin, "../../cmd/skiff")
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // as make build
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building skiff:", err)
		os.Exit(1)
	}
	logger := klog.Background()
	runtimeSvc, err = remote.NewRemoteRuntimeService(criEndpoint, 30*time.Second, nil, &logger)
	if err != nil {
		fmt.Fprintln(os.Stderr, "connecting to", criEndpoint, ":", err)
		os.Exit(1)
	}
	code := m.Run()
	stopShared()
	stopCluster()
	if !inLongGroup() { // the dev containerd is the main process's
		removeTestPods()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// node is one Skiff process with its own root, manifest directory and port.
type node struct {
	t         *testing.T
	root      string
	manifests string
	config    string
	port      int // the read-only API's
	// host is where the read-only API is reached; 127.0.0.1 when empty.
	host string
	// apiPort and healthzPort are the kubelet API's (HTTPS) and the
	// healthz server's.
	apiPort, healthzPort int
	logPath              string
	args                 []string // extra flags for every start
	env                  []string // extra environment (KEY=value) for every start
	cmd                  *exec.Cmd
	exited               chan struct{}
	// shared marks a test's view of the shared node (shared_test.go),
	// which no test may start or stop; ns is that test's namespace, the
	// only one whose pods it sees by name.
	shared bool
	ns     string
	// rt is the node's private runtime (newPrivateNode), endpoint its
	// CRI endpoint; the dev containerd's when empty.
	rt       *privateRuntime
	endpoint string
	name     string // the node's name when not nodeName
	// upstream marks the upstream kubelet in Skiff's place
	// (upstreamnode_test.go).
	upstream bool
}

// stopRuntime stops the node's containerd (its pods keep running);
// startRuntime starts it again.
func (n *node) stopRuntime(t *testing.T) {
	t.Helper()
	if n.rt != nil {
		n.rt.stopDaemon(t)
		return
	}
	stopContainerd(t)
}

func (n *node) startRuntime(t *testing.T) {
	t.Helper()
	if n.rt != nil {
		n.rt.start(t)
		return
	}
	startContainerd(t)
}

// podSubnet is the range the node's runtime gives pod IPs from: its
// private runtime's bridge's, or the dev containerd's.
func (n *node) podSubnet() string {
	if n.rt != nil {
		return n.rt.subnet
	}
	return "10.88.0.0/16"
}

// hostname is the node's name: nodeName, unless it has one of its own.
func (n *node) hostname() string {
	if n.name != "" {
		return n.name
	}
	return nodeName
}

func (n *node) runtimeEndpoint() string {
	if n.endpoint != "" {
		return n.endpoint
	}
	return criEndpoint
}

// newNode prepares (but does not start) a Skiff on the dev containerd.
// Cleanup removes its pods. Its test runs alone (not in parallel).
func newNode(t *testing.T) *node {
	t.Helper()
	serialOnDevRuntime(t)
	removeTestPods() // start from a clean runtime
	n := prepareNode(t, e2eCgroupRoot)
	t.Cleanup(func() {
		n.cleanup()
		removeTestPods()
		removeE2ECgroups(t)
	})
	return n
}

// serialOnDevRuntime opens a test that runs a kubelet of its own on the
// dev containerd: such a test runs before the parallel ones, never beside
// the shared node, whose pods its kubelet would remove as orphans.
func serialOnDevRuntime(t *testing.T) {
	t.Helper()
	checkGroup(t, true)
	if parallelOnly() {
		t.Skip("a serial test: SKIFF_E2E_GROUP=parallel runs the parallel group only")
	}
	if sharedStarted.Load() {
		t.Fatal("a kubelet on the dev containerd in the parallel phase would remove the shared node's pods as orphans; " +
			"a test with its own Skiff must not call t.Parallel (or must use newPrivateNode)")
	}
}

// newPrivateNode prepares (but does not start) a Skiff on a private
// runtime of the test's own, and marks the test parallel. The node's
// tests reach that runtime through n.rt, not runtimeSvc.
func newPrivateNode(t *testing.T) *node {
	t.Helper()
	t.Parallel()
	rt := newPrivateRuntime(t)
	n := prepareNode(t, rt.cgroupRoot)
	n.rt, n.endpoint = rt, rt.endpoint
	t.Cleanup(n.cleanup) // before the runtime's: cleanups run last-in first-out
	return n
}

// cleanup stops Skiff, undoes its bind mount of the root directory and
// shows its log if the test failed.
func (n *node) cleanup() {
	if n.cmd != nil {
		n.stop()
	}
	if left := unmountRoot(n.root); len(left) > 0 {
		n.t.Errorf("mounts left under the root directory: %v", left)
	}
	if n.t.Failed() {
		if b, err := os.ReadFile(n.logPath); err == nil {
			n.t.Logf("skiff log:\n%s", tail(string(b), 150))
		}
	}
}

func prepareNode(t *testing.T, cgroupRoot string) *node {
	t.Helper()
	dir := t.TempDir()
	n := &node{
		t:         t,
		root:      filepath.Join(dir, "root"),
		manifests: filepath.Join(dir, "manifests"),
		config:    filepath.Join(dir, "config.yaml"),
		port:      freePort(t),
		logPath:   filepath.Join(dir, "skiff.log"),
	}
	must(t, os.MkdirAll(n.manifests, 0o755))
	n.apiPort, n.healthzPort = freePort(t), freePort(t)
	must(t, os.WriteFile(n.config, []byte(n.kubeletConfig(cgroupRoot, standaloneAuth)), 0o644))
	return n
}

// kubeletConfig is the node's KubeletConfiguration: its ports, its
// cgroup root, the kubelet API's auth and hostDiskConfig.
func (n *node) kubeletConfig(cgroupRoot, auth string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
readOnlyPort: %d
port: %d
healthzPort: %d
fileCheckFrequency: 2s
podCIDR: 10.88.0.0/16
cgroupRoot: %s
%s%s`, n.port, n.apiPort, n.healthzPort, cgroupRoot, hostDiskConfig, auth)
}

// hostDiskConfig keeps a node whose runtime keeps its images on the
// machine's own disk from collecting them or evicting pods because that
// disk is fuller than the defaults allow (a developer's machine often
// is): the suite's images are imported, not pullable, and other tests'
// pods are not its to evict. Tests of image GC and eviction set their
// own thresholds, which replace these lines (appendConfig), on disk
// nodes of their own (which drop them).
const hostDiskConfig = `imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
`

// mergeConfig is base with extra appended; a line of hostDiskConfig
// whose key extra sets again is left out, so that no key is set twice.
func mergeConfig(base, extra string) string {
	set := map[string]bool{}
	for _, line := range strings.Split(extra, "\n") {
		if k, _, ok := strings.Cut(line, ":"); ok && k != "" && !strings.HasPrefix(k, " ") {
			set[k] = true
		}
	}
	own := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(hostDiskConfig), "\n") {
		own[line] = true
	}
	var b strings.Builder
	for _, line := range strings.SplitAfter(base, "\n") {
		k, _, _ := strings.Cut(line, ":")
		if own[strings.TrimSuffix(line, "\n")] && set[k] {
			continue
		}
		b.WriteString(line)
	}
	if s := b.String(); s != "" && !strings.HasSuffix(s, "\n") {
		b.WriteString("\n")
	}
	b.WriteString(extra)
	return b.String()
}

// standaloneAuth is the kubelet API's configuration of a node without
// an apiserver: on loopback, no webhooks (they need an apiserver), and
// with no authentication method every request gets 401. Tests of the
// API change it with setAuth.
const standaloneAuth = `address: 127.0.0.1
authentication:
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
`

// setAuth replaces the node's kubelet API configuration (standaloneAuth)
// with auth; it must come before any other change to the config file.
func (n *node) setAuth(auth string) {
	n.t.Helper()
	b, err := os.ReadFile(n.config)
	must(n.t, err)
	if !strings.Contains(string(b), standaloneAuth) {
		n.t.Fatalf("setAuth: the config no longer has the standalone API configuration:\n%s", b)
	}
	must(n.t, os.WriteFile(n.config, []byte(strings.Replace(string(b), standaloneAuth, auth, 1)), 0o644))
}

// start runs Skiff and waits for its read-only API to answer.
func (n *node) start(extraArgs ...string) {
	n.t.Helper()
	if n.shared {
		n.t.Fatal("the shared node is started once for all parallel tests; a test that starts Skiff needs its own (newNode)")
	}
	must(n.t, n.launch(extraArgs...))
	must(n.t, n.waitHealthy(20*time.Second))
}

// launch starts the Skiff process with the node's arguments.
func (n *node) launch(extraArgs ...string) error {
	if n.upstream {
		return n.launchUpstream(extraArgs...)
	}
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	args := append([]string{
		"--config", n.config,
		"--container-runtime-endpoint", n.runtimeEndpoint(),
		"--root-dir", n.root,
		"--pod-manifest-path", n.manifests,
		"--hostname-override", n.hostname(),
		// Each node's own, not upstream's fixed one shared by the machine.
		"--device-plugin-dir", n.devicePluginDir(),
		"--v", "2",
	}, append(n.args, extraArgs...)...)
	n.cmd = exec.Command(skiffBin, args...)
	n.cmd.Env = append(os.Environ(), n.env...)
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	// A test run that is killed takes its Skiff with it: a stray one would
	// remove the next run's pods as orphans.
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := n.cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	n.exited = make(chan struct{})
	go func() { _ = n.cmd.Wait(); logf.Close(); close(n.exited) }()
	return nil
}

// waitHealthy waits for the read-only API's /healthz to answer 200.
func (n *node) waitHealthy(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-n.exited:
			return fmt.Errorf("skiff exited early: %s", tail(n.log(), 20))
		default:
		}
		u := n.url("/healthz")
		if n.upstream { // no read-only port
			u = fmt.Sprintf("http://127.0.0.1:%d/healthz", n.healthzPort)
		}
		if resp, err := http.Get(u); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("skiff's /healthz did not answer 200 within %v", timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stop sends SIGTERM and waits for Skiff to exit.
func (n *node) stop() {
	n.t.Helper()
	if n.shared {
		n.t.Fatal("the shared node runs until the suite ends; a test that stops Skiff needs its own (newNode)")
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(30 * time.Second):
		_ = n.cmd.Process.Kill()
		<-n.exited
		n.t.Errorf("skiff did not stop within 30s of SIGTERM")
	}
	n.cmd = nil
}

// devicePluginDir is where the node's device plugins register.
func (n *node) devicePluginDir() string { return filepath.Join(n.root, "device-plugins") }

func (n *node) url(path string) string {
	host := n.host
	if host == "" {
		host = "127.0.0.1"
	}
	return fmt.Sprintf("http://%s%s", net.JoinHostPort(host, strconv.Itoa(n.port)), path)
}

func (n *node) log() string {
	b, _ := os.ReadFile(n.logPath)
	return string(b)
}

// writeManifest writes a pod manifest into the manifest directory.
func (n *node) writeManifest(file, content string) {
	n.t.Helper()
	tmp := filepath.Join(n.manifests, "."+file+".tmp")
	must(n.t, os.WriteFile(tmp, []byte(content), 0o644))
	must(n.t, os.Rename(tmp, filepath.Join(n.manifests, file)))
}

func (n *node) removeManifest(file string) {
	n.t.Helper()
	must(n.t, os.Remove(filepath.Join(n.manifests, file)))
}

// pods returns /pods.
func (n *node) pods() ([]v1.Pod, error) {
	resp, err := http.Get(n.url("/pods"))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var list v1.PodList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, fmt.Errorf("decode /pods: %w", err)
	}
	return list.Items, nil
}

// pod returns the pod of that name from /pods, nil if absent.
func (n *node) pod(name string) (*v1.Pod, error) {
	pods, err := n.pods()
	if err != nil {
		return nil, err
	}
	for i := range pods {
		if pods[i].Name == name && (n.ns == "" || pods[i].Namespace == n.ns) {
			return &pods[i], nil
		}
	}
	return nil, nil
}

// waitRunning waits until the pod is Running with every container running.
func (n *node) waitRunning(name string, timeout time.Duration) *v1.Pod {
	n.t.Helper()
	var got *v1.Pod
	waitFor(n.t, timeout, "pod "+name+" running", func() (bool, error) {
		p, err := n.pod(name)
		if err != nil || p == nil || p.Status.Phase != v1.PodRunning {
			return false, nil
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Running == nil {
				return false, nil
			}
		}
		got = p
		return true, nil
	})
	return got
}

// staticPod renders a single-container busybox pod manifest.
func staticPod(name, script string, extra string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  labels:
    %s: "true"
spec:
  terminationGracePeriodSeconds: 5
%s  containers:
  - name: main
    image: %s
    imagePullPolicy: Never
    command: ["sh", "-c", %q]
`, name, testLabel, extra, busybox, script)
}

// sandboxes and containers of a pod UID, straight from the dev containerd.
func sandboxesOf(t *testing.T, uid string) []*runtimeapi.PodSandbox {
	t.Helper()
	return sandboxesIn(t, runtimeSvc, uid)
}

func containersOf(t *testing.T, uid string) []*runtimeapi.Container {
	t.Helper()
	return containersIn(t, runtimeSvc, uid)
}

func sandboxesIn(t *testing.T, rs internalapi.RuntimeService, uid string) []*runtimeapi.PodSandbox {
	t.Helper()
	s, err := rs.ListPodSandbox(context.Background(), &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.uid": uid}})
	must(t, err)
	return s
}

func containersIn(t *testing.T, rs internalapi.RuntimeService, uid string) []*runtimeapi.Container {
	t.Helper()
	c, err := rs.ListContainers(context.Background(), &runtimeapi.ContainerFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.uid": uid}})
	must(t, err)
	return c
}

// runtime is the CRI runtime the node runs on: its private one, or the
// dev containerd.
func (n *node) runtime() internalapi.RuntimeService {
	if n.rt != nil {
		return n.rt.rs
	}
	return runtimeSvc
}

// sandboxes and containers of a pod UID, from the node's runtime.
func (n *node) sandboxesOf(uid string) []*runtimeapi.PodSandbox {
	n.t.Helper()
	return sandboxesIn(n.t, n.runtime(), uid)
}

func (n *node) containersOf(uid string) []*runtimeapi.Container {
	n.t.Helper()
	return containersIn(n.t, n.runtime(), uid)
}

// removeTestPods removes every sandbox a test made, whatever state it is
// in. containerd 1.6 can lose a container's exit across a restart; its
// CRI then waits forever to stop that container. A daemon restart makes
// it read the task's real state, so one test's lost exit does not stall
// every later test.
func removeTestPods() {
	err := removeTestSandboxes()
	if err == nil {
		return
	}
	fmt.Fprintf(os.Stderr, "e2e: restarting the dev containerd: %v\n", err)
	if err := restartDevContainerd(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return
	}
	if err := removeTestSandboxes(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: test sandboxes left on the dev containerd: %v\n", err)
	}
}

func removeTestSandboxes() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sbs, err := runtimeSvc.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{testLabel: "true"}})
	if err != nil {
		return fmt.Errorf("listing sandboxes: %w", err)
	}
	var errs []error
	for _, sb := range sbs {
		if err := runtimeSvc.StopPodSandbox(ctx, sb.Id); err != nil {
			errs = append(errs, fmt.Errorf("stopping sandbox %s: %w", sb.Id, err))
			continue
		}
		if err := runtimeSvc.RemovePodSandbox(ctx, sb.Id); err != nil {
			errs = append(errs, fmt.Errorf("removing sandbox %s: %w", sb.Id, err))
		}
	}
	return errors.Join(errs...)
}

// killContainerProcess kills a container's process from outside Skiff, as
// the OOM killer or an operator would.
func (n *node) killContainerProcess(id string) {
	n.t.Helper()
	must(n.t, syscall.Kill(runtimePidIn(n.t, n.runtime(), id), syscall.SIGKILL))
}

// runtimePidIn is the host pid of a running container, as the runtime
// rs says.
func runtimePidIn(t *testing.T, rs internalapi.RuntimeService, id string) int {
	t.Helper()
	resp, err := rs.ContainerStatus(context.Background(), id, true)
	must(t, err)
	var info struct {
		Pid int `json:"pid"`
	}
	must(t, json.Unmarshal([]byte(resp.Info["info"]), &info))
	if info.Pid <= 0 {
		t.Fatalf("container %s has no pid: %v", id, resp.Info["info"])
	}
	return info.Pid
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func freePort(t *testing.T) int {
	port, err := ports.Free()
	must(t, err)
	return port
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func tail(s string, lines int) string {
	l := strings.Split(s, "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// unmountRoot undoes the bind mount that makes Skiff's root directory a
// shared mount (as upstream's kubelet makes its own), so that the
// directory can be removed. It returns the mounts that were left below
// the root (detached with it): volumes Skiff did not clean up.
func unmountRoot(root string) []string {
	left := mountsUnder(root + "/")
	for _, m := range mountsUnder(root) {
		if m == root {
			if err := syscall.Unmount(root, syscall.MNT_DETACH); err != nil {
				fmt.Fprintf(os.Stderr, "unmount %s: %v\n", root, err)
			}
		}
	}
	return left
}
