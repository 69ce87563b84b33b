//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A ConfigMap marked immutable is read once and never again for
// the pod. Deleted and recreated with other data (all immutability
// allows), it keeps its first content in the running pod, while a mutable
// ConfigMap of the same pod, updated at the same time, shows its update
// on the next sync: the sync ran, and skipped the immutable object.
func TestImmutableConfigMapIsNotReread(t *testing.T) {
	cn := sharedNode(t)
	ctx := cn.ctx()
	cms := cn.admin.CoreV1().ConfigMaps(cn.ns)
	yes := true
	frozen := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "frozen"}, Immutable: &yes, Data: map[string]string{"v": "frozen-1"}}
	_, err := cms.Create(ctx, frozen, metav1.CreateOptions{})
	must(t, err)
	_, err = cms.Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "live"}, Data: map[string]string{"v": "live-1"}}, metav1.CreateOptions{})
	must(t, err)

	p := busyboxPod("imm", `while true; do echo "frozen=$(cat /frozen/v) live=$(cat /live/v)"; sleep 1; done`)
	p.Spec.Volumes = []v1.Volume{
		{Name: "frozen", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "frozen"}}}},
		{Name: "live", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "live"}}}},
	}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "frozen", MountPath: "/frozen"}, {Name: "live", MountPath: "/live"}}
	created := cn.createPod(t, p)
	cn.waitPod(t, cn.ns, p.Name, 60*time.Second, "ready", isReady)
	logFile := filepath.Join(podLogsRoot, cn.ns+"_"+p.Name+"_"+string(created.UID), "main", "0.log")
	lastLine := func() string {
		b, _ := os.ReadFile(logFile)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		return lines[len(lines)-1]
	}
	waitFor(t, 20*time.Second, "first contents", func() (bool, error) {
		return strings.HasSuffix(lastLine(), "frozen=frozen-1 live=live-1"), nil
	})

	must(t, cms.Delete(ctx, "frozen", metav1.DeleteOptions{}))
	frozen.Data["v"] = "frozen-2"
	_, err = cms.Create(ctx, frozen, metav1.CreateOptions{})
	must(t, err)
	live, err := cms.Get(ctx, "live", metav1.GetOptions{})
	must(t, err)
	live.Data["v"] = "live-2"
	_, err = cms.Update(ctx, live, metav1.UpdateOptions{})
	must(t, err)

	waitFor(t, 90*time.Second, "the mutable ConfigMap's update", func() (bool, error) {
		return strings.Contains(lastLine(), "live=live-2"), nil
	})
	if l := lastLine(); !strings.HasSuffix(l, "frozen=frozen-1 live=live-2") {
		t.Errorf("after a sync: %q, want the immutable ConfigMap's first contents", l)
	}
}
