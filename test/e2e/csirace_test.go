//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
