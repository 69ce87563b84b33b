//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// hostpathVolume is a volume in the hostpath driver's state file: where
// the kubelet staged and published it, as the driver recorded it.
type hostpathVolume struct {
	VolID, VolName    string
	Ephemeral         bool
	Staged, Published []string
}

// driverVolumes reads the driver's state file (its --statedir). The
// driver rewrites it in place (truncate, then write), so a read that
// lands in between sees it short: it is read again until it parses.
func (n *csiNode) driverVolumes(t *testing.T) []hostpathVolume {
	t.Helper()
	var s struct{ Volumes []hostpathVolume }
	waitFor(t, 10*time.Second, "the driver's state file whole", func() (bool, error) {
		b, err := os.ReadFile(filepath.Join(n.dir, "state", "state.json"))
		if os.IsNotExist(err) {
			s.Volumes = nil
			return true, nil
		}
		if err != nil {
			return false, err
		}
		return json.Unmarshal(b, &s) == nil, nil
	})
	return s.Volumes
}

// csiTargets are the publish targets of the pod's CSI volumes, where
// the kubelet has the driver mount them.
func (n *csiNode) csiTargets(p *v1.Pod) []string {
	var out []string
	for _, v := range p.Spec.Volumes {
		name := v.Name
		switch {
		case v.CSI != nil:
		case v.PersistentVolumeClaim != nil:
			name = n.ns + "-" + v.PersistentVolumeClaim.ClaimName // claimPV's PV name
		default:
			continue
		}
		out = append(out, filepath.Join(n.root, "pods", string(p.UID), "volumes/kubernetes.io~csi", name, "mount"))
	}
	return out
}

// leaks says what of the node's mounts and the driver's state no pod of
// the namespace accounts for: a mount under the root directory outside
// a pod's directory, a publish to no target of a pod, a stage with no
// publish; and which of the pods' CSI volumes are not mounted (so that
// the check is of a node that serves its pods). A pod still terminating
// is one too: the check is of what stays once it is gone. Empty when
// none.
func (n *csiNode) leaks(t *testing.T) []string {
	t.Helper()
	list, err := n.admin.CoreV1().Pods(n.ns).List(n.ctx(), metav1.ListOptions{})
	must(t, err)
	var out, targets, dirs []string
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp != nil { // checked once it is gone
			out = append(out, "pod still terminating: "+p.Name)
			continue
		}
		targets = append(targets, n.csiTargets(p)...)
		dirs = append(dirs, filepath.Join(n.root, "pods", string(p.UID))+"/")
	}
	mounts := mountsUnder(n.root + "/")
	for _, m := range mounts {
		if !slices.ContainsFunc(dirs, func(d string) bool { return strings.HasPrefix(m, d) }) {
			out = append(out, "mount of no pod: "+m)
		}
	}
	for _, target := range targets {
		if !slices.Contains(mounts, target) {
			out = append(out, "a pod's volume not mounted: "+target)
		}
	}
	for _, v := range n.driverVolumes(t) {
		for _, p := range v.Published {
			if !slices.Contains(targets, p) {
				out = append(out, fmt.Sprintf("volume %s published to no pod's target: %s", v.VolName, p))
			}
		}
		if len(v.Staged) > 0 && len(v.Published) == 0 {
			out = append(out, fmt.Sprintf("volume %s staged at %v with no publish", v.VolName, v.Staged))
		}
	}
	return out
}

// checkNoLeaks waits for the node to settle with no leak (leaks) and
// fails with the leaks found last if it does not.
func (n *csiNode) checkNoLeaks(t *testing.T, when string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		l := n.leaks(t)
		if len(l) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s:\n%s", when, strings.Join(l, "\n"))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// runningPods creates the pods and waits for them to run.
func (n *csiNode) runningPods(t *testing.T, pods ...*v1.Pod) {
	t.Helper()
	for _, p := range pods {
		n.createPod(t, p)
	}
	for _, p := range pods {
		n.waitPod(t, n.ns, p.Name, 90*time.Second, "running", isRunning)
	}
}

// deleteWhileDown stops Skiff, deletes the pods (at once: no kubelet
// runs to end them), creates the new ones, starts Skiff again and waits
// for the new pods to run.
func (n *csiNode) deleteWhileDown(t *testing.T, gone []string, created ...*v1.Pod) {
	t.Helper()
	n.stop()
	for _, name := range gone {
		must(t, n.admin.CoreV1().Pods(n.ns).Delete(n.ctx(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	}
	for _, p := range created {
		n.createPod(t, p)
	}
	n.start()
	for _, p := range created {
		n.waitPod(t, n.ns, p.Name, 90*time.Second, "running", isRunning)
	}
}

// Nothing leaks after create/delete cycles of pods with CSI PVs (two
// pods sharing one) and inline volumes, some deleted while Skiff runs,
// some while it is down, with pods created while it is down too: after
// each round the mounts under the root directory are the running pods'
// volumes and nothing else, and the driver's own state holds no publish
// of a pod that is gone and no stage without a publish. Once the last
// pod goes, nothing is mounted and nothing staged.
func TestCSIVolumesLeakNothingAcrossCycles(t *testing.T) {
	n := newCSINode(t, true)
	for _, claim := range []string{"a", "b"} {
		vol := n.createVolume(t, "vol-"+claim+"-"+n.ns)
		n.claimPV(t, claim, v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{
			Driver: n.driver, VolumeHandle: vol.GetVolumeId(), VolumeAttributes: vol.GetVolumeContext()}}, nil)
		n.claim(t, claim)
	}

	n.runningPods(t, sleeperClaimPod("a1", "a"), sleeperClaimPod("a2", "a"),
		sleeperClaimPod("b1", "b"), sleeperInlinePod("i1", n.driver))
	n.checkNoLeaks(t, "with four pods running")
	n.deletePodNow(t, "a1")
	n.deletePodNow(t, "i1")
	n.checkNoLeaks(t, "after a pod sharing a volume and an inline pod were deleted")

	// The last user of a, and b's, deleted while Skiff is down; b's next
	// user and an inline pod created meanwhile.
	n.deleteWhileDown(t, []string{"a2", "b1"}, sleeperClaimPod("b2", "b"), sleeperInlinePod("i2", n.driver))
	n.checkNoLeaks(t, "after pods were deleted and created while Skiff was down")

	n.deleteWhileDown(t, []string{"b2", "i2"}, sleeperClaimPod("a3", "a"))
	n.checkNoLeaks(t, "after a second round while Skiff was down")
	n.deletePodNow(t, "a3")
	n.checkNoLeaks(t, "after the last pod was deleted")
	if mps := mountsUnder(n.root + "/"); len(mps) != 0 {
		t.Errorf("mounts left under the root directory: %v", mps)
	}
	for _, v := range n.driverVolumes(t) {
		if len(v.Staged)+len(v.Published) != 0 || v.Ephemeral {
			t.Errorf("the driver still holds %+v", v)
		}
	}
	stages := n.grpcRequests(t, "/csi.v1.Node/NodeStageVolume")
	unstages := n.grpcRequests(t, "/csi.v1.Node/NodeUnstageVolume")
	if len(stages) < 3 || len(unstages) < 3 {
		t.Errorf("%d stages and %d unstages: want a, b and a again staged and unstaged", len(stages), len(unstages))
	}
}
