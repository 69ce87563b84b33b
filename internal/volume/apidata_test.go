package volume

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func cmVolume(name string, optional bool) v1.Volume {
	return v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
		LocalObjectReference: v1.LocalObjectReference{Name: name}, Optional: &optional,
	}}}
}

func TestConfigMapVolume(t *testing.T) {
	client := fake.NewClientset(&v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "conf", Namespace: "ns"},
		Data:       map[string]string{"a": "1"},
	})
	m := New(Config{RootDir: t.TempDir(), Client: client})
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1", Namespace: "ns"}, Spec: v1.PodSpec{Volumes: []v1.Volume{cmVolume("conf", false)}}}
	got, err := m.SetUp(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	v := got["v"]
	if b, err := os.ReadFile(filepath.Join(v.HostPath, "a")); err != nil || string(b) != "1" || !v.ReadOnly {
		t.Fatalf("file a: %q %v readOnly=%v", b, err, v.ReadOnly)
	}
	if target, err := os.Readlink(filepath.Join(v.HostPath, "..data")); err != nil || !strings.HasPrefix(target, "..") {
		t.Errorf("..data link: %q %v", target, err)
	}

	// Missing and not optional: an error naming it; optional: empty volume.
	pod.Spec.Volumes = []v1.Volume{cmVolume("nope", false)}
	if _, err := m.SetUp(context.Background(), pod); err == nil || !strings.Contains(err.Error(), `"nope" not found`) {
		t.Errorf("missing configmap: %v", err)
	}
	pod.Spec.Volumes = []v1.Volume{cmVolume("nope", true)}
	if _, err := m.SetUp(context.Background(), pod); err != nil {
		t.Errorf("optional missing configmap: %v", err)
	}
}

func TestAPIDataNeedsAnAPIServer(t *testing.T) {
	m := New(Config{RootDir: t.TempDir()})
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1", Namespace: "ns"}, Spec: v1.PodSpec{Volumes: []v1.Volume{cmVolume("conf", false)}}}
	if _, err := m.SetUp(context.Background(), pod); err == nil || !strings.Contains(err.Error(), "standalone") {
		t.Errorf("standalone configMap volume: %v", err)
	}
}
