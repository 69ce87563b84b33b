//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// csiNodeWith is a private cluster node with the kubelet configuration
// lines config appended, the hostpath driver of a name of its own
// registered, and a CSIDriver of spec. With stateSize, the driver keeps
// its volumes on a tmpfs of that size of their own, so that what it says
// of a volume's filesystem is that volume's.
func csiNodeWith(t *testing.T, config string, spec storagev1.CSIDriverSpec, stateSize string) *csiNode {
	t.Helper()
	cn := newPrivateClusterNode(t)
	f, err := os.OpenFile(cn.config, os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteString(config)
	must(t, err)
	must(t, f.Close())
	cn.start()
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	dir := t.TempDir()
	if stateSize != "" {
		state := filepath.Join(dir, "state")
		must(t, os.Mkdir(state, 0o755))
		must(t, unix.Mount("tmpfs", state, "tmpfs", 0, "size="+stateSize))
		// Last, after the driver is gone (cleanups run last-in first-out).
		t.Cleanup(func() { _ = unix.Unmount(state, unix.MNT_DETACH) })
	}
	n := &csiNode{clusterNode: cn, driver: fmt.Sprintf("hostpath-%d.csi.k8s.io", cn.rt.id), dir: dir}
	n.sock, n.driverLog = hostpathDriverOn(t, cn, dir, n.driver)
	t.Cleanup(cn.deleteAllPods)
	_, err = cn.admin.StorageV1().CSIDrivers().Create(cn.ctx(), &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: n.driver}, Spec: spec}, metav1.CreateOptions{})
	must(t, err)
	t.Cleanup(func() {
		_ = cn.admin.StorageV1().CSIDrivers().Delete(context.Background(), n.driver, metav1.DeleteOptions{})
	})
	n.register(t)
	return n
}

// csiPV makes a volume of the driver and a claim bound to it through a
// PV (ReadWriteOnce, fsType given), and returns the volume's handle.
func (n *csiNode) csiPV(t *testing.T, claim, fsType string) string {
	t.Helper()
	vol := n.createVolume(t, "vol-"+n.ns+"-"+claim)
	n.claimPV(t, claim, v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{
		Driver: n.driver, VolumeHandle: vol.GetVolumeId(), VolumeAttributes: vol.GetVolumeContext(), FSType: fsType}}, nil)
	n.claim(t, claim)
	return vol.GetVolumeId()
}

// hostTree lists a host directory's tree: each entry's type and mode,
// owner, size, inode and modification time, and a file's content.
func hostTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	must(t, filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		line := fmt.Sprintf("%o %d:%d %d ino %d mtime %d", st.Mode, st.Uid, st.Gid, st.Size, st.Ino, st.Mtim.Nano())
		if st.Mode&unix.S_IFMT == unix.S_IFREG {
			b, _ := os.ReadFile(p)
			line += " " + string(b)
		}
		out[strings.TrimPrefix(p, dir)] = line
		return nil
	}))
	return out
}

// decoyVolume makes dir/name look like a volume directory of Skiff's: a
// vol_data.json naming the volume, and an empty mount directory sub.
func decoyVolume(t *testing.T, dir, name, sub string, v map[string]string) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Join(dir, name, sub), 0o750))
	b, err := json.Marshal(v)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, name, "vol_data.json"), b, 0o600))
}

// TestCSISymlinkSwapsRaceStagePublishTeardown: a host process playing a
// hostile driver (cmd/csiswap) swaps the driver's plugin directory and
// every pod's kubernetes.io~csi directory for symlinks to host
// directories, hundreds of times, while pods with a CSI PV of the real
// hostpath driver are staged, published, torn down and unstaged. The
// host directories hold decoys of the volume's staging and publish
// directories with a vol_data.json each, so a kubelet that followed a
// symlink would write, read or remove there.
//
// The staging host directory must not change at all (the hostpath driver
// makes nothing at a staging path). In the publish host directory the
// real driver, which resolves the paths it is given, may make and remove
// its mount directory when a swap catches it between Skiff's checks and
// its own call, so there only Skiff's part is checked: no vol_data.json
// written, changed or removed. Pods go on (a swap fails an operation,
// which is retried) and, once the swaps stop, nothing stays mounted.
func TestCSISymlinkSwapsRaceStagePublishTeardown(t *testing.T) {
	bin := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", filepath.Join(bin, "csiswap"), "./cmd/csiswap").CombinedOutput(); err != nil {
		t.Fatalf("build csiswap: %v\n%s", err, out)
	}
	n := csiNodeWith(t, "", storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)}, "")
	handle := n.csiPV(t, "data", "")
	pvName := n.ns + "-data"
	staging, pods := t.TempDir(), t.TempDir()
	decoy := map[string]string{"volumeHandle": handle, "driverName": n.driver, "specVolID": pvName}
	decoyVolume(t, staging, fmt.Sprintf("%x", sha256.Sum256([]byte(handle))), "globalmount", decoy)
	decoyVolume(t, pods, pvName, "mount", decoy)
	t.Cleanup(func() { unmountUnder(t, pods) })
	stagingBefore, podsBefore := hostTree(t, staging), hostTree(t, pods)

	swap := startProcess(t, filepath.Join(n.dir, "csiswap.log"), filepath.Join(bin, "csiswap"), n.root, n.driver, staging, pods)
	// At least 4 pods, and more until a swap got in Skiff's way and was
	// refused (a FailedMount saying so): the race must have been run.
	rounds := 0
	for ; rounds < 4 || refusals(t, n) == 0; rounds++ {
		if rounds == 16 {
			t.Fatalf("no swap got in the way of %d pods: the race was not run", rounds)
		}
		name := fmt.Sprintf("swap-%d", rounds)
		pod := n.createPod(t, claimPod(name, "data", false, "echo "+name+" >> /data/log"))
		n.waitPod(t, n.ns, name, 120*time.Second, "Succeeded through the swaps", succeeded)
		must(t, n.admin.CoreV1().Pods(n.ns).Delete(n.ctx(), name, metav1.DeleteOptions{}))
		waitFor(t, 120*time.Second, "the pod's volume torn down through the swaps", func() (bool, error) {
			_, err := os.Lstat(filepath.Join(n.root, "pods", string(pod.UID)))
			return os.IsNotExist(err), nil
		})
	}
	must(t, swap.cmd.Process.Signal(syscall.SIGTERM))
	<-swap.done
	b, err := os.ReadFile(filepath.Join(n.dir, "csiswap.log"))
	must(t, err)
	t.Logf("%s; %d pods; FailedMount events refusing a symlink: %d", strings.TrimSpace(string(b)), rounds, refusals(t, n))
	var swaps, podDirs int
	if _, err := fmt.Sscanf(string(b), "csiswap: %d swaps, %d pod directories", &swaps, &podDirs); err != nil || swaps == 0 || podDirs < rounds {
		t.Errorf("the swapper did not race every pod (%q): %v", b, err)
	}

	if now := hostTree(t, staging); fmt.Sprint(now) != fmt.Sprint(stagingBefore) {
		t.Errorf("the staging host directory changed:\nbefore %v\nafter  %v", stagingBefore, now)
	}
	now := hostTree(t, pods)
	for p, before := range podsBefore {
		if strings.HasSuffix(p, "vol_data.json") && now[p] != before {
			t.Errorf("%s in the publish host directory changed: %q, was %q", p, now[p], before)
		}
	}
	for p, line := range now {
		if strings.HasSuffix(p, "vol_data.json") && podsBefore[p] == "" {
			t.Errorf("a vol_data.json was written in the publish host directory: %s %s", p, line)
		}
	}
	if got := len(n.grpcRequests(t, "/csi.v1.Node/NodeUnstageVolume")); got < rounds {
		t.Errorf("%d unstages for %d pods", got, rounds)
	}
	waitFor(t, 60*time.Second, "no mount left under the root directory", func() (bool, error) {
		return len(mountsUnder(n.root+"/")) == 0, nil
	})
}

// refusals counts the FailedMount events in the test's namespace of an
// operation refused because a symlink was in the way.
func refusals(t *testing.T, n *csiNode) int {
	t.Helper()
	evs, err := n.admin.CoreV1().Events(n.ns).List(n.ctx(), metav1.ListOptions{})
	must(t, err)
	c := 0
	for _, e := range evs.Items {
		if e.Reason == "FailedMount" && strings.Contains(e.Message, "refused") {
			c++
		}
	}
	return c
}
