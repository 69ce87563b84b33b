package volume

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestHostPathTypes(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	typ := func(t v1.HostPathType) *v1.HostPathType { return &t }
	for _, c := range []struct {
		path string
		typ  *v1.HostPathType
		ok   bool
	}{
		{dir, nil, true},
		{filepath.Join(dir, "none"), nil, true}, // "" checks nothing
		{dir, typ(v1.HostPathDirectory), true},
		{file, typ(v1.HostPathDirectory), false},
		{filepath.Join(dir, "none"), typ(v1.HostPathDirectory), false},
		{file, typ(v1.HostPathFile), true},
		{dir, typ(v1.HostPathFile), false},
		{filepath.Join(dir, "made"), typ(v1.HostPathDirectoryOrCreate), true},
		{filepath.Join(dir, "madefile"), typ(v1.HostPathFileOrCreate), true},
		{file, typ(v1.HostPathSocket), false},
		{"/dev/null", typ(v1.HostPathCharDev), true},
		{file, typ(v1.HostPathCharDev), false},
		{"/dev/null", typ(v1.HostPathBlockDev), false},
	} {
		_, err := setUpHostPath(&v1.HostPathVolumeSource{Path: c.path, Type: c.typ})
		if (err == nil) != c.ok {
			t.Errorf("%s type %v: err %v, want ok=%v", c.path, c.typ, err, c.ok)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "made")); err != nil || !fi.IsDir() {
		t.Error("DirectoryOrCreate did not create a directory")
	}
	if fi, err := os.Stat(filepath.Join(dir, "madefile")); err != nil || !fi.Mode().IsRegular() {
		t.Error("FileOrCreate did not create a file")
	}
}

func TestSetUpAndTearDown(t *testing.T) {
	m := New(Config{RootDir: t.TempDir()})
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1"}, Spec: v1.PodSpec{Volumes: []v1.Volume{
		{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
	}}}
	got, err := m.SetUp(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(got["scratch"].HostPath)
	if err != nil || fi.Mode().Perm() != 0o777 || !strings.Contains(got["scratch"].HostPath, "kubernetes.io~empty-dir") {
		t.Fatalf("emptyDir %v: %v %v", got, fi, err)
	}
	if uids, _ := m.PodsOnDisk(); len(uids) != 1 || uids[0] != "u1" {
		t.Errorf("pods on disk %v", uids)
	}
	// An ended pod's volumes go, with the emptyDir's data; its directory
	// and other files stay until the pod is gone.
	for _, f := range []string{filepath.Join(got["scratch"].HostPath, "data"), filepath.Join(m.PodDir("u1"), "etc-hosts")} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.TearDownVolumes(context.Background(), "u1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(m.PodDir("u1"), "volumes")); !os.IsNotExist(err) {
		t.Errorf("volumes left after TearDownVolumes: %v", err)
	}
	if _, err := os.Stat(filepath.Join(m.PodDir("u1"), "etc-hosts")); err != nil {
		t.Errorf("TearDownVolumes removed the pod's other files: %v", err)
	}
	if err := m.TearDown(context.Background(), "u1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(m.PodDir("u1")); !os.IsNotExist(err) {
		t.Errorf("pod directory left: %v", err)
	}

	pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{Name: "share", VolumeSource: v1.VolumeSource{
		NFS: &v1.NFSVolumeSource{Server: "s", Path: "/"}}})
	if _, err := m.SetUp(context.Background(), pod); err == nil || !strings.Contains(err.Error(), "nfs is not supported") {
		t.Errorf("unsupported type: %v", err)
	}
}
