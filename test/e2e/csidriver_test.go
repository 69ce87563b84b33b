//go:build e2e

package e2e

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The CSI hostpath driver and its sidecars are prebuilt in
// ../shared/testbin/csi beside the repository (its README says how).
const csiTestbin = "../../../shared/testbin/csi"

const hostpathDriver = "hostpath.csi.k8s.io"

// csiBinary unpacks one of the prebuilt binaries into dir, after checking
// it against SHA256SUMS.
func csiBinary(t *testing.T, dir, name string) string {
	t.Helper()
	src := filepath.Join(csiTestbin, name+".xz")
	b, err := os.ReadFile(src)
	must(t, err)
	sum := sha256.Sum256(b)
	sums, err := os.ReadFile(filepath.Join(csiTestbin, "SHA256SUMS"))
	must(t, err)
	if !strings.Contains(string(sums), hex.EncodeToString(sum[:])+"  "+name+".xz") {
		t.Fatalf("%s does not match SHA256SUMS", src)
	}
	bin := filepath.Join(dir, name)
	out, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	must(t, err)
	cmd := exec.Command("xz", "-dc", src)
	cmd.Stdout = out
	must(t, cmd.Run())
	must(t, out.Close())
	return bin
}

// process is a program a test runs; done is closed when it has exited.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startProcess runs bin with its output in logPath until the test ends.
func startProcess(t *testing.T, logPath, bin string, args ...string) *process {
	t.Helper()
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	must(t, err)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	must(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("%s:\n%s", filepath.Base(logPath), tail(string(b), 40))
			}
		}
	})
	return &process{cmd: cmd, done: done}
}

// shortDir is a directory of a short path: unix socket paths must fit
// in 108 bytes, and a test's temporary directories carry its name.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "csi")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// hostpathDriverOn runs the hostpath driver of that name as a host
// process for the node (-v=5: it logs every call and its request). It
// returns the driver's socket and its log.
func hostpathDriverOn(t *testing.T, cn *clusterNode, dir, driver string) (sock, driverLog string) {
	t.Helper()
	sock = filepath.Join(shortDir(t), "csi.sock")
	driverLog = filepath.Join(dir, "hostpathplugin.log")
	startProcess(t, driverLog, csiBinary(t, dir, "hostpathplugin"), "--drivername="+driver,
		"--endpoint=unix://"+sock, "--nodeid="+cn.hostname(), "--statedir="+filepath.Join(dir, "state"),
		"--maxvolumespernode=7", "--v=5")
	return sock, driverLog
}

// startRegistrar runs node-driver-registrar for the driver at sock,
// announcing it in the node's plugin registry. The registrar is given the
// registry through a symlink of a short path, for its socket's path to
// fit; the socket is made in the registry itself, where Skiff finds it.
func startRegistrar(t *testing.T, cn *clusterNode, bin, logPath, sock string) *process {
	t.Helper()
	link := filepath.Join(shortDir(t), "registry")
	must(t, os.Symlink(filepath.Join(cn.root, "plugins_registry"), link))
	return startProcess(t, logPath, bin, "--csi-address="+sock, "--kubelet-registration-path="+sock,
		"--plugin-registration-path="+link, "--v=5")
}

// countCalls counts the gRPC calls of a method in the driver's log.
func countCalls(t *testing.T, driverLog, method string) int {
	t.Helper()
	f, err := os.Open(driverLog)
	must(t, err)
	defer f.Close()
	n := 0
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		if strings.Contains(s.Text(), "GRPC call: "+method) {
			n++
		}
	}
	return n
}

// csiNodeDriver returns the driver's entry in the node's CSINode.
func (cn *clusterNode) csiNodeDriver(name string) (*storagev1.CSINodeDriver, bool) {
	c, err := cn.admin.StorageV1().CSINodes().Get(cn.ctx(), cn.hostname(), metav1.GetOptions{})
	if err != nil {
		return nil, false
	}
	for i := range c.Spec.Drivers {
		if c.Spec.Drivers[i].Name == name {
			return &c.Spec.Drivers[i], true
		}
	}
	return nil, false
}

func nodeIDs(t *testing.T, n *v1.Node) map[string]string {
	t.Helper()
	ids := map[string]string{}
	if s := n.Annotations["csi.volume.kubernetes.io/nodeid"]; s != "" {
		must(t, json.Unmarshal([]byte(s), &ids))
	}
	return ids
}

// The real hostpath driver and node-driver-registrar, run as host
// processes against a private node's root directory: the registrar's
// socket in plugins_registry registers the driver (CSINode, the node ID
// annotation, topology labels); a registrar restarted after a SIGKILL
// (its stale socket replaced) registers it again; its socket's removal
// deregisters it.
func TestCSIDriverRegistersThroughPluginRegistry(t *testing.T) {
	cn := newPrivateClusterNode(t)
	cn.start()
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	dir := t.TempDir()
	sock, driverLog := hostpathDriverOn(t, cn, dir, hostpathDriver)
	registrar := csiBinary(t, dir, "csi-node-driver-registrar")
	registry := filepath.Join(cn.root, "plugins_registry")
	regLog := filepath.Join(dir, "registrar.log")

	r1 := startRegistrar(t, cn, registrar, regLog, sock)
	waitFor(t, 60*time.Second, "the driver in the CSINode", func() (bool, error) {
		d, ok := cn.csiNodeDriver(hostpathDriver)
		return ok && d.NodeID == cn.hostname() && d.Allocatable != nil && *d.Allocatable.Count == 7 &&
			len(d.TopologyKeys) == 1 && d.TopologyKeys[0] == "topology.hostpath.csi/node", nil
	})
	node := cn.getNode(t)
	if got := nodeIDs(t, node)[hostpathDriver]; got != cn.hostname() {
		t.Errorf("node ID annotation %q", node.Annotations["csi.volume.kubernetes.io/nodeid"])
	}
	if got := node.Labels["topology.hostpath.csi/node"]; got != cn.hostname() {
		t.Errorf("topology label %q", got)
	}
	c, err := cn.admin.StorageV1().CSINodes().Get(cn.ctx(), cn.hostname(), metav1.GetOptions{})
	must(t, err)
	if len(c.OwnerReferences) != 1 || c.OwnerReferences[0].UID != node.UID {
		t.Errorf("the CSINode is not owned by the Node: %v", c.OwnerReferences)
	}

	// A registrar killed hard leaves its socket; the next one replaces it.
	must(t, r1.cmd.Process.Kill())
	<-r1.done
	calls := countCalls(t, driverLog, "/csi.v1.Node/NodeGetInfo")
	r2 := startRegistrar(t, cn, registrar, regLog, sock)
	// The old socket's removal deregisters the driver for a moment, as
	// upstream's; the new one's NodeGetInfo comes before the CSINode write.
	waitFor(t, 60*time.Second, "registration again after the registrar's restart", func() (bool, error) {
		if countCalls(t, driverLog, "/csi.v1.Node/NodeGetInfo") <= calls {
			return false, nil
		}
		_, ok := cn.csiNodeDriver(hostpathDriver)
		return ok, nil
	})

	// The registration socket goes: the driver is deregistered.
	must(t, r2.cmd.Process.Signal(syscall.SIGTERM))
	<-r2.done // a socket it left is removed below
	if err := os.Remove(filepath.Join(registry, hostpathDriver+"-reg.sock")); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the driver out of the CSINode", func() (bool, error) {
		_, ok := cn.csiNodeDriver(hostpathDriver)
		return !ok, nil
	})
	if _, ok := nodeIDs(t, cn.getNode(t))[hostpathDriver]; ok {
		t.Error("the node ID annotation still names the deregistered driver")
	}
}
