package volume

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

// gets counts the GETs of resource in the fake clientset's actions.
func gets(client *fake.Clientset, resource string) int {
	n := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == resource {
			n++
		}
	}
	return n
}

func TestImmutableObjectsAreReadOncePerPod(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		name      string
		immutable *bool
		wantGets  int // after three syncs of one pod
	}{
		{"immutable: read once", &yes, 1},
		{"immutable false: read every sync", &no, 3},
		{"immutable unset: read every sync", nil, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(
				&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf", Namespace: "ns"}, Immutable: tt.immutable, Data: map[string]string{"a": "1"}},
				&v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "ns"}, Immutable: tt.immutable, Data: map[string][]byte{"p": []byte("s1")}},
				&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "proj", Namespace: "ns"}, Immutable: tt.immutable, Data: map[string]string{"b": "2"}},
			)
			m := New(Config{RootDir: t.TempDir(), Client: client})
			// The secret and projected volumes need tmpfs mounts: only the
			// configMap volume is set up for real; the others go through
			// the same getters.
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1", Namespace: "ns"}, Spec: v1.PodSpec{Volumes: []v1.Volume{cmVolume("conf", false)}}}
			ctx := context.Background()
			for range 3 {
				got, err := m.SetUp(ctx, pod)
				if err != nil {
					t.Fatal(err)
				}
				if b, _ := os.ReadFile(filepath.Join(got["v"].HostPath, "a")); string(b) != "1" {
					t.Fatalf("file a = %q", b)
				}
				if _, err := m.secret(ctx, pod, "ns", "creds"); err != nil {
					t.Fatal(err)
				}
				if _, err := m.getters(ctx, pod).ConfigMaps.GetConfigMap("ns", "proj"); err != nil {
					t.Fatal(err)
				}
			}
			if n := gets(client, "configmaps"); n != 2*tt.wantGets {
				t.Errorf("%d configmap GETs, want %d", n, 2*tt.wantGets)
			}
			if n := gets(client, "secrets"); n != tt.wantGets {
				t.Errorf("%d secret GETs, want %d", n, tt.wantGets)
			}
		})
	}
}

func TestImmutableCacheIsPerPodAndForgotten(t *testing.T) {
	yes := true
	client := fake.NewClientset(&v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "conf", Namespace: "ns"}, Immutable: &yes, Data: map[string]string{"a": "old"},
	})
	dir := t.TempDir()
	m := New(Config{RootDir: dir, Client: client})
	ctx := context.Background()
	podA := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "a", Namespace: "ns"}, Spec: v1.PodSpec{Volumes: []v1.Volume{cmVolume("conf", false)}}}
	if _, err := m.SetUp(ctx, podA); err != nil {
		t.Fatal(err)
	}
	// Deleted and recreated with other data (what immutability allows):
	// the running pod keeps what it read, a new pod reads the new object.
	cm, _ := client.CoreV1().ConfigMaps("ns").Get(ctx, "conf", metav1.GetOptions{})
	cm.Data["a"] = "new"
	if _, err := client.CoreV1().ConfigMaps("ns").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	read := func(p *v1.Pod) string {
		t.Helper()
		got, err := m.SetUp(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(filepath.Join(got["v"].HostPath, "a"))
		return string(b)
	}
	if got := read(podA); got != "old" {
		t.Errorf("running pod sees %q, want the data it read first", got)
	}
	podB := podA.DeepCopy()
	podB.UID = "b"
	if got := read(podB); got != "new" {
		t.Errorf("new pod sees %q, want the current object", got)
	}
	if err := m.TearDown(ctx, podA.UID); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.immutable.get(immutableKey{types.UID("a"), "ConfigMap", "ns", "conf"}); ok {
		t.Error("the torn-down pod's immutable objects are still cached")
	}
}

func TestImmutableCacheDoesNotCacheErrors(t *testing.T) {
	client := fake.NewClientset()
	m := New(Config{RootDir: t.TempDir(), Client: client})
	ctx := context.Background()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1", Namespace: "ns"}, Spec: v1.PodSpec{Volumes: []v1.Volume{cmVolume("late", true)}}}
	if _, err := m.SetUp(ctx, pod); err != nil {
		t.Fatal(err)
	}
	yes := true
	if _, err := client.CoreV1().ConfigMaps("ns").Create(ctx, &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "late", Namespace: "ns"}, Immutable: &yes, Data: map[string]string{"a": "here"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := m.SetUp(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(got["v"].HostPath, "a")); string(b) != "here" {
		t.Errorf("an optional ConfigMap created later: file a = %q", b)
	}
}
