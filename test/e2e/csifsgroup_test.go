//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestCSIFSGroupAppliedWithoutFollowingSymlinks: the hostpath driver's
// CSIDriver says fsGroupPolicy File and the driver lacks
// VOLUME_MOUNT_GROUP, so Skiff gives the published volume the pod's
// fsGroup. A first pod (root) fills the volume and keeps exchanging a
// directory of it with a symlink to a host directory; pods with fsGroup
// 2345 running as user 1000 then start on the same volume, one after
// another, each while the swaps go on. Each can write the volume's root
// and sees the group on it and on the first pod's files (so the group was
// applied), and the host directory, root's 0700 with a 0600 file, keeps
// its owners and modes.
func TestCSIFSGroupAppliedWithoutFollowingSymlinks(t *testing.T) {
	n := csiNodeWith(t, "", storagev1.CSIDriverSpec{AttachRequired: ptr.To(false),
		FSGroupPolicy: ptr.To(storagev1.FileFSGroupPolicy)}, "")
	n.csiPV(t, "data", "")
	host := t.TempDir()
	must(t, os.WriteFile(filepath.Join(host, "secret"), []byte("host"), 0o600))
	must(t, os.Chmod(host, 0o700))
	before := hostTree(t, host)

	swapper := claimPod("swapper", "data", false, fmt.Sprintf(
		"cd /data && mkdir -p d && for i in $(seq 200); do echo $i > d/f$i; done && ln -sfn %s l && touch ready && "+
			"while true; do mv -T d x; mv -T l d; mv -T x l; mv -T d x; mv -T l d; mv -T x l; done", host))
	swapper.Spec.RestartPolicy = v1.RestartPolicyAlways
	n.createPod(t, swapper)
	n.waitPod(t, n.ns, "swapper", 60*time.Second, "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	for i := range 3 {
		name := fmt.Sprintf("grouped-%d", i)
		p := claimPod(name, "data", false, "test -e /data/ready && touch /data/"+name+
			` && test "$(stat -c %g /data)" = 2345 && test "$(stat -c %g /data/ready)" = 2345`)
		p.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptr.To[int64](2345), RunAsUser: ptr.To[int64](1000)}
		n.createPod(t, p)
		n.waitPod(t, n.ns, name, 60*time.Second, "Succeeded: the volume has the fsGroup", succeeded)
	}
	p, err := n.admin.CoreV1().Pods(n.ns).Get(n.ctx(), "swapper", metav1.GetOptions{})
	must(t, err)
	if cs := p.Status.ContainerStatuses; len(cs) != 1 || cs[0].RestartCount != 0 || cs[0].State.Running == nil {
		t.Errorf("the swapping container stopped: %+v", cs)
	}
	if now := hostTree(t, host); fmt.Sprint(now) != fmt.Sprint(before) {
		t.Errorf("the host directory changed:\nbefore %v\nafter  %v", before, now)
	}
}
