//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// configMap and secret volumes with items,
// modes and fsGroup; a ConfigMap update reaches the running container;
// downward API labels follow the pod.
func TestConfigMapSecretDownwardAPIVolumes(t *testing.T) {
	cn := sharedNode(t)
	ctx := context.Background()
	_, err := cn.admin.CoreV1().ConfigMaps(cn.ns).Create(ctx, &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "conf"},
		Data:       map[string]string{"greeting": "hello-v1", "other": "unused"},
	}, metav1.CreateOptions{})
	must(t, err)
	_, err = cn.admin.CoreV1().Secrets(cn.ns).Create(ctx, &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds"},
		Data:       map[string][]byte{"password": []byte("s3cret")},
	}, metav1.CreateOptions{})
	must(t, err)

	fsGroup, mode0404, mode0440 := int64(2000), int32(0o404), int32(0o440)
	p := busyboxPod("data", `while true; do
  echo "cm=$(cat /cm/conf/greeting.txt) secret=$(cat /sec/password) labels=$(tr '\n' ' ' < /info/labels)"
  ls -lnL /cm/conf/greeting.txt /sec/password | awk '{print "mode", $1, $4, $NF}'
  sleep 1
done`)
	p.Labels["tier"] = "one"
	p.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: &fsGroup}
	p.Spec.Volumes = []v1.Volume{
		{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
			LocalObjectReference: v1.LocalObjectReference{Name: "conf"},
			Items:                []v1.KeyToPath{{Key: "greeting", Path: "conf/greeting.txt", Mode: &mode0404}},
		}}},
		{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "creds", DefaultMode: &mode0440}}},
		{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{
			Items: []v1.DownwardAPIVolumeFile{{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}}},
		}}},
	}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{
		{Name: "cm", MountPath: "/cm"}, {Name: "sec", MountPath: "/sec"}, {Name: "info", MountPath: "/info"},
	}
	created := cn.createPod(t, p)
	cn.waitPod(t, cn.ns, "data", 60*time.Second, "running", isReady)
	logFile := filepath.Join(podLogsRoot, cn.ns+"_data_"+string(created.UID), "main", "0.log")
	waitLog := func(what string, timeout time.Duration, want ...string) {
		t.Helper()
		waitFor(t, timeout, what, func() (bool, error) {
			b, _ := os.ReadFile(logFile)
			lines := strings.Split(string(b), "\n")
			if len(lines) > 8 {
				lines = lines[len(lines)-8:] // the latest rounds only
			}
			recent := strings.Join(lines, "\n")
			for _, w := range want {
				if !strings.Contains(recent, w) {
					return false, nil
				}
			}
			return true, nil
		})
	}
	waitLog("files, modes and fsGroup", 20*time.Second,
		"cm=hello-v1 secret=s3cret", `tier="one"`,
		// With an fsGroup, upstream adds group read to files of read-only
		// volumes: the item's 0404 becomes 0444.
		"mode -r--r--r-- 2000 /cm/conf/greeting.txt", "mode -r--r----- 2000 /sec/password")

	// The secret is on a tmpfs, not the node's disk.
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if !strings.Contains(string(mounts), filepath.Join(string(created.UID), "volumes", "kubernetes.io~secret", "sec")) {
		t.Error("the secret volume is not a mount of its own (tmpfs)")
	}

	cm, err := cn.admin.CoreV1().ConfigMaps(cn.ns).Get(ctx, "conf", metav1.GetOptions{})
	must(t, err)
	cm.Data["greeting"] = "hello-v2"
	_, err = cn.admin.CoreV1().ConfigMaps(cn.ns).Update(ctx, cm, metav1.UpdateOptions{})
	must(t, err)
	updated := time.Now()
	waitLog("ConfigMap update inside the container", 90*time.Second, "cm=hello-v2")
	t.Logf("ConfigMap change seen in the container after %v", time.Since(updated).Round(time.Second))

	_, err = cn.admin.CoreV1().Pods(cn.ns).Patch(ctx, "data", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"tier":"two"}}}`), metav1.PatchOptions{})
	must(t, err)
	waitLog("downward API labels updated", 30*time.Second, `tier="two"`)
}
