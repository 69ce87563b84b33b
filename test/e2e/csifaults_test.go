//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// Faults of a CSI driver and of Skiff, with the real hostpath driver as a
// host process of a private node (csimount_test.go's csiNode): the pods'
// state and events while each fault lasts, and the recovery after.

// driverPid finds the node's hostpath driver process by its arguments.
func (n *csiNode) driverPid(t *testing.T) int {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	must(t, err)
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), "--drivername="+n.driver+"\x00") {
			pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			must(t, err)
			return pid
		}
	}
	t.Fatalf("no process of the driver %s", n.driver)
	return 0
}

// signalDriver sends sig to the driver; a SIGSTOP is undone when the test
// ends, for the driver to unpublish the test's volumes.
func (n *csiNode) signalDriver(t *testing.T, sig syscall.Signal) int {
	t.Helper()
	pid := n.driverPid(t)
	must(t, syscall.Kill(pid, sig))
	if sig == syscall.SIGSTOP {
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	}
	return pid
}

// stateFile is the driver's record of its volumes.
func (n *csiNode) stateFile() string { return filepath.Join(n.dir, "state", "state.json") }

// holdStateWrites makes the driver's next write of its state file block:
// the file becomes a FIFO with no reader, so the call that writes it (a
// stage) stays inside the driver. release lets the write through and
// puts back a regular file with what the driver wrote; restore puts back
// the file as it was, for a driver that was killed meanwhile.
func (n *csiNode) holdStateWrites(t *testing.T) (release, restore func()) {
	t.Helper()
	saved, err := os.ReadFile(n.stateFile())
	must(t, err)
	must(t, os.Remove(n.stateFile()))
	must(t, syscall.Mkfifo(n.stateFile(), 0o600))
	done := false
	restore = func() {
		if !done {
			done = true
			must(t, os.Remove(n.stateFile()))
			must(t, os.WriteFile(n.stateFile(), saved, 0o600))
		}
	}
	release = func() {
		f, err := os.Open(n.stateFile()) // the blocked writer's open returns
		must(t, err)
		written, err := io.ReadAll(f)
		must(t, err)
		f.Close()
		saved, done = written, false
		restore()
	}
	t.Cleanup(func() {
		if !done { // a driver still blocked needs a reader to go on
			if f, err := os.OpenFile(n.stateFile(), os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
				_, _ = io.Copy(io.Discard, f)
				f.Close()
			}
			restore()
		}
	})
	return release, restore
}

// createPodHeldInStage holds the driver's state writes, creates the pod
// and waits for the driver to be inside NodeStageVolume for it.
func (n *csiNode) createPodHeldInStage(t *testing.T, pod *v1.Pod) (release, restore func()) {
	t.Helper()
	release, restore = n.holdStateWrites(t)
	n.createPod(t, pod)
	waitFor(t, 60*time.Second, "the driver inside NodeStageVolume", func() (bool, error) {
		return countCalls(t, n.driverLog, "/csi.v1.Node/NodeStageVolume") == 1, nil
	})
	return release, restore
}

// staged returns where the driver's state says each volume is staged.
// The driver rewrites its state file in place, so a read can catch it
// half-written: that is read again.
func (n *csiNode) staged(t *testing.T) map[string][]string {
	t.Helper()
	var st struct {
		Volumes []struct {
			VolID  string
			Staged []string
		}
	}
	waitFor(t, time.Second, "the driver's state file whole", func() (bool, error) {
		b, err := os.ReadFile(n.stateFile())
		if err != nil {
			return false, err
		}
		var syntax *json.SyntaxError
		if err = json.Unmarshal(b, &st); errors.As(err, &syntax) {
			return false, nil
		}
		return err == nil, err
	})
	out := map[string][]string{}
	for _, v := range st.Volumes {
		out[v.VolID] = v.Staged
	}
	return out
}

// csiClaimPod makes a volume of the driver, its PV and claim, and a pod
// of the same name that runs script with it at /data.
func (n *csiNode) csiClaimPod(t *testing.T, name, script string) (volID string, pod *v1.Pod) {
	t.Helper()
	vol := n.createVolume(t, "vol-"+name+"-"+n.ns)
	n.claimPV(t, name, v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{
		Driver: n.driver, VolumeHandle: vol.GetVolumeId(), VolumeAttributes: vol.GetVolumeContext()}}, nil)
	n.claim(t, name)
	return vol.GetVolumeId(), claimPod(name, name, false, script)
}

// settled: the pod's volume was unpublished and unstaged after its
// deletion, and nothing is left mounted under the root directory nor
// staged in the driver.
func (n *csiNode) settled(t *testing.T, pod, volID string) {
	t.Helper()
	must(t, n.admin.CoreV1().Pods(n.ns).Delete(n.ctx(), pod, metav1.DeleteOptions{}))
	// The staging directory goes after the unstage returns: waited for too.
	waitFor(t, 60*time.Second, "the volume unstaged in the driver, no mount nor staging directory left", func() (bool, error) {
		dirs, _ := filepath.Glob(filepath.Join(n.root, "plugins/kubernetes.io/csi", n.driver, "*"))
		return len(n.staged(t)[volID]) == 0 && len(mountsUnder(n.root+"/")) == 0 && len(dirs) == 0, nil
	})
}

// A driver that hangs (SIGSTOP): its pods wait in ContainerCreating, a
// FailedMount event says the call failed, and a pod without CSI volumes
// starts meanwhile; a second volume of the same driver waits as the
// first does (every call to the driver hangs), and neither holds the
// other up once the driver goes on.
func TestCSIDriverHangs(t *testing.T) {
	n := newCSINode(t, true)
	n.signalDriver(t, syscall.SIGSTOP)
	n.createPod(t, inlinePod("first", n.driver))
	n.createPod(t, inlinePod("second", n.driver))
	plain := busyboxPod("plain", "true")
	plain.Spec.RestartPolicy = v1.RestartPolicyNever
	n.createPod(t, plain)
	n.waitPod(t, n.ns, "plain", 60*time.Second, "a pod without CSI done while the driver hangs", succeeded)
	for _, name := range []string{"first", "second"} {
		n.waitPod(t, n.ns, name, 10*time.Second, "ContainerCreating while the driver hangs", waitingCreating)
	}
	n.waitPodEvent(t, "first", "FailedMount", `MountVolume.SetUp failed for volume "scratch"`, 60*time.Second)
	n.waitPod(t, n.ns, "first", 5*time.Second, "still ContainerCreating", waitingCreating)

	n.signalDriver(t, syscall.SIGCONT)
	for _, name := range []string{"first", "second"} {
		n.waitPod(t, n.ns, name, 60*time.Second, "Succeeded once the driver goes on", succeeded)
	}
}

// A driver that returns errors (the directory of the volume's data moved
// away, so its bind mount fails): the pod waits with FailedMount events
// carrying the driver's own message, and runs once the cause goes.
func TestCSIDriverReturnsErrors(t *testing.T) {
	n := newCSINode(t, true)
	volID, pod := n.csiClaimPod(t, "data", "echo ok > /data/f")
	data := filepath.Join(n.dir, "state", volID)
	must(t, os.Rename(data, data+".away"))
	n.createPod(t, pod)
	n.waitPodEvent(t, "data", "FailedMount", "failed to mount device: "+data, 60*time.Second)
	n.waitPod(t, n.ns, "data", 10*time.Second, "ContainerCreating while the driver fails", waitingCreating)
	must(t, os.Rename(data+".away", data))
	n.waitPod(t, n.ns, "data", 90*time.Second, "Succeeded once the driver finds the volume", succeeded)
	if b, err := os.ReadFile(filepath.Join(data, "f")); err != nil || string(b) != "ok\n" {
		t.Errorf("the pod's write on the driver's storage: %q, %v", b, err)
	}
	n.settled(t, "data", volID)
}

// A driver killed in the middle of NodeStageVolume and started again:
// the stage is tried again, the pod runs, the volume is staged at one
// path, and after the pod nothing is left mounted or staged. The pod
// here and in the other mid-stage tests runs until deleted: a finished
// pod's volumes are torn down at once, before the test could look.
func TestCSIDriverRestartedMidStage(t *testing.T) {
	n := newCSINode(t, true)
	volID, pod := n.csiClaimPod(t, "data", sleeper)
	_, restore := n.createPodHeldInStage(t, pod)
	n.restartDriverAfter(t, restore)
	n.waitPod(t, n.ns, "data", 90*time.Second, "Running after the driver's restart", isRunning)
	if got := n.staged(t)[volID]; len(got) != 1 {
		t.Errorf("the driver has the volume staged at %v, want one path", got)
	}
	n.settled(t, "data", volID)
}

// restartDriverAfter kills the driver, runs between (with the driver
// dead), and starts it again.
func (n *csiNode) restartDriverAfter(t *testing.T, between func()) {
	t.Helper()
	pid := n.driverPid(t)
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	must(t, err)
	args := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
	must(t, syscall.Kill(pid, syscall.SIGKILL))
	waitFor(t, 10*time.Second, "the killed driver gone", func() (bool, error) {
		_, err := os.Stat("/proc/" + strconv.Itoa(pid))
		return os.IsNotExist(err), nil
	})
	between()
	startProcess(t, n.driverLog, args[0], args[1:]...)
}

// Skiff killed while the driver is inside NodeStageVolume; the driver
// then finishes, and Skiff starts again: the pod runs, the volume is
// staged at one path only (the restarted Skiff's stage of it again is
// idempotent, as upstream's after a restart), and after the pod nothing
// is left mounted or staged.
func TestSkiffRestartedMidStage(t *testing.T) {
	n := newCSINode(t, true)
	volID, pod := n.csiClaimPod(t, "data", sleeper)
	release, _ := n.createPodHeldInStage(t, pod)
	must(t, n.cmd.Process.Kill())
	<-n.exited
	n.cmd = nil
	release()
	n.start()
	n.waitPod(t, n.ns, "data", 90*time.Second, "Running after Skiff's restart", isRunning)
	staging := n.grpcRequests(t, "/csi.v1.Node/NodeStageVolume")
	for _, s := range staging {
		if !strings.Contains(s, filepath.Join(n.root, "plugins/kubernetes.io/csi", n.driver)) || !strings.Contains(s, volID) {
			t.Errorf("NodeStageVolume elsewhere: %s", s)
		}
	}
	if got := n.staged(t)[volID]; len(got) != 1 {
		t.Errorf("the driver has the volume staged at %v, want one path", got)
	}
	n.settled(t, "data", volID)
}

// registration is a plugin's registration service with a name of the
// test's choosing, as a registrar serves it in the plugin registry; it
// keeps the status Skiff reports back.
type registration struct {
	registerapi.UnimplementedRegistrationServer
	info   registerapi.PluginInfo
	status chan *registerapi.RegistrationStatus
}

func (r *registration) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &r.info, nil
}

func (r *registration) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	r.status <- s
	return &registerapi.RegistrationStatusResponse{}, nil
}

// serveRegistration serves r on the socket file of the node's plugin
// registry.
func serveRegistration(t *testing.T, cn *clusterNode, file string, r *registration) {
	t.Helper()
	l, err := net.Listen("unix", filepath.Join(cn.root, "plugins_registry", file))
	must(t, err)
	g := grpc.NewServer()
	registerapi.RegisterRegistrationServer(g, r)
	go func() { _ = g.Serve(l) }()
	t.Cleanup(g.Stop)
}

// Driver names and volume handles that try to lead out of Skiff's
// directories: plugins announcing themselves under names with "../",
// "/" or too long are refused (told so through their registration
// status, not in the CSINode), and nothing is made for them; PVs whose
// handles are such paths leave their pods waiting with the driver's
// refusal in FailedMount events, the handles are only ever hashed into
// staging paths, and nothing is written where they point.
func TestCSIBadNamesAndHandlesWriteNothingOutside(t *testing.T) {
	n := newCSINode(t, true)
	escape := filepath.Join(os.TempDir(), "csifaults-escape-"+n.ns)
	t.Cleanup(func() { os.RemoveAll(escape) })
	rel, err := filepath.Rel(filepath.Join(n.root, "plugins/kubernetes.io/csi"), escape)
	must(t, err)
	for i, name := range []string{rel, "/", strings.Repeat("d", 300) + ".csi.k8s.io"} {
		r := &registration{info: registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: name, Endpoint: n.sock,
			SupportedVersions: []string{"1.0.0"}}, status: make(chan *registerapi.RegistrationStatus, 1)}
		serveRegistration(t, n.clusterNode, fmt.Sprintf("bad-%d.sock", i), r)
		select {
		case s := <-r.status:
			if s.PluginRegistered || !strings.Contains(s.Error, "not a valid CSI driver name") {
				t.Errorf("plugin named %q: registration status %+v", name, s)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("plugin named %q: no registration status", name)
		}
		if _, ok := n.csiNodeDriver(name); ok {
			t.Errorf("plugin named %q is in the CSINode", name)
		}
	}

	handles := []string{"../../../../../../../.." + escape, "/", strings.Repeat("h", 1000)}
	for i, h := range handles {
		claim := fmt.Sprintf("bad-%d", i)
		n.claimPV(t, claim, v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: n.driver, VolumeHandle: h}}, nil)
		n.claim(t, claim)
		n.createPod(t, claimPod(claim, claim, false, "true"))
	}
	for i := range handles {
		pod := fmt.Sprintf("bad-%d", i)
		n.waitPodEvent(t, pod, "FailedMount", "does not exist in the volumes list", 60*time.Second)
		n.waitPod(t, n.ns, pod, 10*time.Second, "ContainerCreating", waitingCreating)
	}
	if _, err := os.Lstat(escape); !os.IsNotExist(err) {
		t.Errorf("something was written at %s: %v", escape, err)
	}
	hashed := map[string]bool{}
	for _, h := range handles {
		hashed[fmt.Sprintf("%x", sha256.Sum256([]byte(h)))] = true
	}
	entries, err := os.ReadDir(filepath.Join(n.root, "plugins/kubernetes.io/csi"))
	must(t, err)
	for _, e := range entries {
		if e.Name() != n.driver {
			t.Errorf("a directory for another driver: %s", e.Name())
		}
	}
	staging, _ := os.ReadDir(filepath.Join(n.root, "plugins/kubernetes.io/csi", n.driver))
	for _, e := range staging {
		if !hashed[e.Name()] {
			t.Errorf("a staging directory not named by a handle's hash: %s", e.Name())
		}
	}
}

// Skiff and the driver both killed while the driver is inside
// NodeStageVolume, so that the stage never happened; both started
// again: the staging directory Skiff left says only that a stage
// began, so the restarted Skiff stages the volume before publishing it
// (the driver refuses to publish a volume it has not staged), the pod
// runs, and after it nothing is left mounted or staged.
func TestSkiffAndDriverKilledMidStage(t *testing.T) {
	n := newCSINode(t, true)
	volID, pod := n.csiClaimPod(t, "data", sleeper)
	_, restore := n.createPodHeldInStage(t, pod)
	must(t, n.cmd.Process.Kill())
	<-n.exited
	n.cmd = nil
	n.restartDriverAfter(t, restore)
	if got := n.staged(t)[volID]; len(got) != 0 {
		t.Fatalf("the restarted driver has the volume staged at %v, want nowhere", got)
	}
	n.start()
	n.waitPod(t, n.ns, "data", 90*time.Second, "Running after both restarts", isRunning)
	if got := n.staged(t)[volID]; len(got) != 1 {
		t.Errorf("the driver has the volume staged at %v, want one path", got)
	}
	n.settled(t, "data", volID)
}
