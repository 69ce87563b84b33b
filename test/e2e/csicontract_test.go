//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// noVolumeStats keeps both kubelets from asking for volume stats while a
// test runs: each asks once at start and then every period, at times of
// its own, which is no part of the calls compared.
const noVolumeStats = "volumeStatsAggPeriod: 1h\n"

// hostpathFor runs the hostpath driver of a name of its own as a host
// process for a running node, makes its CSIDriver object as the driver's
// deployment does (no attachment, pod info on mount, persistent and
// ephemeral volumes) and registers it through its registrar.
func hostpathFor(t *testing.T, cn *clusterNode) *csiNode {
	t.Helper()
	dir := t.TempDir()
	n := &csiNode{clusterNode: cn, driver: fmt.Sprintf("hostpath-%d.csi.k8s.io", cn.rt.id), dir: dir}
	n.sock, n.driverLog = hostpathDriverOn(t, cn, dir, n.driver)
	// Before the driver stops (cleanups run last-in first-out).
	t.Cleanup(cn.deleteAllPods)
	_, err := cn.admin.StorageV1().CSIDrivers().Create(cn.ctx(), &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: n.driver}, Spec: storagev1.CSIDriverSpec{
			AttachRequired: ptr.To(false), PodInfoOnMount: ptr.To(true),
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral},
		}}, metav1.CreateOptions{})
	must(t, err)
	t.Cleanup(func() {
		_ = cn.admin.StorageV1().CSIDrivers().Delete(context.Background(), n.driver, metav1.DeleteOptions{})
	})
	n.register(t)
	return n
}

// csiCall is one gRPC call the driver received, as its -v=5 log gives it
// in JSON: the method, the request, and the error if it failed.
type csiCall struct {
	Method  string
	Request map[string]any
	Error   string
}

// csiCalls returns the calls the driver logged, in the order it got them.
func (n *csiNode) csiCalls(t *testing.T) []csiCall {
	t.Helper()
	f, err := os.Open(n.driverLog)
	must(t, err)
	defer f.Close()
	var out []csiCall
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		_, js, ok := strings.Cut(s.Text(), "gRPCCall: ")
		if !ok {
			continue
		}
		var c csiCall
		must(t, json.Unmarshal([]byte(js), &c))
		out = append(out, c)
	}
	must(t, s.Err())
	return out
}

// countMethod counts the calls of method (its last path element).
func countMethod(calls []csiCall, method string) int {
	n := 0
	for _, c := range calls {
		if strings.HasSuffix(c.Method, "/"+method) {
			n++
		}
	}
	return n
}

// sleeperClaimPod and sleeperInlinePod keep a CSI PV (its claim) and an
// inline volume of the driver mounted until deleted.
func sleeperClaimPod(name, claim string) *v1.Pod {
	p := claimPod(name, claim, false, sleeper)
	p.Spec.RestartPolicy = v1.RestartPolicyAlways
	return p
}

func sleeperInlinePod(name, driver string) *v1.Pod {
	p := inlinePod(name, driver)
	p.Spec.RestartPolicy = v1.RestartPolicyAlways
	p.Spec.Containers[0].Command = []string{"sh", "-c", sleeper}
	return p
}

// deletePodNow deletes a pod with a grace period of one second.
func (cn *clusterNode) deletePodNow(t *testing.T, name string) {
	t.Helper()
	must(t, cn.admin.CoreV1().Pods(cn.ns).Delete(cn.ctx(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](1)}))
}

// contractCalls runs the compared steps on a node with its own driver:
// a pod of a CSI PV (staged, then published), a pod of an inline volume
// (published), the first pod deleted (unpublished, unstaged), then the
// second (unpublished). It returns the node's calls to the driver from
// the first pod's creation on, normalized (normalizeCalls).
func contractCalls(t *testing.T, cn *clusterNode) []string {
	t.Helper()
	n := hostpathFor(t, cn)
	vol := n.createVolume(t, "vol-"+n.ns)
	n.claimPV(t, "data", v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{
		Driver: n.driver, VolumeHandle: vol.GetVolumeId(), VolumeAttributes: vol.GetVolumeContext()}}, nil)
	n.claim(t, "data")
	mark := len(n.csiCalls(t))

	pv := n.createPod(t, sleeperClaimPod("pv", "data"))
	n.waitPod(t, n.ns, "pv", 60*time.Second, "running", isRunning)
	inline := n.createPod(t, sleeperInlinePod("inline", n.driver))
	n.waitPod(t, n.ns, "inline", 60*time.Second, "running", isRunning)
	n.deletePodNow(t, "pv")
	waitFor(t, 60*time.Second, "the PV unstaged", func() (bool, error) {
		return countMethod(n.csiCalls(t), "NodeUnstageVolume") == 1, nil
	})
	n.deletePodNow(t, "inline")
	waitFor(t, 60*time.Second, "the inline volume unpublished and the pod directories gone", func() (bool, error) {
		return countMethod(n.csiCalls(t), "NodeUnpublishVolume") == 2 && n.podDirsGone(nil), nil
	})

	calls := n.csiCalls(t)[mark:]
	// Longest first where one could hold another: the root directory.
	names := []string{
		n.root, "<root>",
		vol.GetVolumeId(), "<volume>",
		fmt.Sprintf("%x", sha256.Sum256([]byte(vol.GetVolumeId()))), "<sha256(volume)>",
		// upstream's handle of an inline volume: csi-sha256(pod UID + volume name)
		fmt.Sprintf("csi-%x", sha256.Sum256([]byte(string(inline.UID)+"scratch"))), "<handle:inline>",
		string(pv.UID), "<uid:pv>",
		string(inline.UID), "<uid:inline>",
		n.ns, "<ns>",
		n.driver, "<driver>",
		n.hostname(), "<node>",
	}
	return normalizeCalls(t, calls, names)
}

// normalizeCalls writes each call as its method, its request in JSON
// (keys sorted) and "error" if it failed, with what must differ between
// two nodes replaced by its name (names: pairs of a value and its name):
// root directories, pod UIDs, the namespace, node and driver names, the
// volume's generated ID. Where two could match at one place, the first
// pair given wins.
func normalizeCalls(t *testing.T, calls []csiCall, names []string) []string {
	t.Helper()
	r := strings.NewReplacer(names...)
	var out []string
	for _, c := range calls {
		req, err := json.Marshal(c.Request)
		must(t, err)
		line := c.Method + " " + r.Replace(string(req))
		if c.Error != "" {
			line += " error"
		}
		out = append(out, line)
	}
	return out
}

// The CSI node contract kept: the same pods (a CSI PV, staged and
// published; an inline ephemeral volume; both deleted) on a Skiff node
// and on the upstream kubelet v1.34, each with a hostpath driver of its
// own, and the gRPC calls each driver logged (method, paths, volume
// context and capability, pod information, in order) are the same once
// what must differ is named alike.
func TestCSICallsSameAsUpstreamKubelet(t *testing.T) {
	sk := newPrivateClusterNode(t)
	sk.appendConfig(noVolumeStats)
	up := startUpstreamNode(t, getCluster(t), noVolumeStats)
	sk.start()
	sk.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)

	got := contractCalls(t, sk)
	want := contractCalls(t, up)
	if countMethod(callsOf(got), "NodeStageVolume") != 1 || countMethod(callsOf(got), "NodePublishVolume") != 2 {
		t.Errorf("Skiff's calls lack the stage and two publishes:\n%s", strings.Join(got, "\n"))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the driver's calls differ\nunder Skiff:\n%s\nunder the upstream kubelet:\n%s",
			strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// callsOf turns normalized lines back into calls of their methods.
func callsOf(lines []string) []csiCall {
	out := make([]csiCall, 0, len(lines))
	for _, l := range lines {
		m, _, _ := strings.Cut(l, " ")
		out = append(out, csiCall{Method: m})
	}
	return out
}
