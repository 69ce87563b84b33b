package csi

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// parentOf is a root directory that holds dir.
func parentOf(dir string) rootDir { return rootDir(filepath.Dir(dir)) }

// vol_data.json is never read or written through a symlink, never read
// from a FIFO (which would block), never read past its bound, and a
// driver name it gives must be one a driver could register with.
func TestVolDataRefusesWhatADriverCouldPlant(t *testing.T) {
	dir := t.TempDir()
	host := filepath.Join(t.TempDir(), "host-file")
	if err := os.WriteFile(host, []byte(`{"volumeHandle":"h","driverName":"d.example.com"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, volDataFile)
	if err := os.Symlink(host, link); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := parentOf(dir).readVolData(dir); ok || err == nil {
		t.Errorf("read through a symlink: ok %v err %v", ok, err)
	}
	if err := parentOf(dir).writeVolData(dir, volData{VolumeHandle: "x", DriverName: "d.example.com"}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(host); !strings.Contains(string(b), `"volumeHandle":"h"`) {
		t.Errorf("the write went through the symlink to the host file: %s", b)
	}
	if st, err := os.Lstat(link); err != nil || !st.Mode().IsRegular() {
		t.Errorf("vol_data.json is not a regular file after the write: %v %v", st, err)
	}

	fifoDir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(fifoDir, volDataFile), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, _, err := parentOf(fifoDir).readVolData(fifoDir); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a FIFO was read as vol_data.json")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reading a FIFO as vol_data.json blocked")
	}

	big := t.TempDir()
	if err := os.WriteFile(filepath.Join(big, volDataFile), []byte(`{"volumeHandle":"`+strings.Repeat("a", maxVolData)+`","driverName":"d"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := parentOf(big).readVolData(big); ok || err == nil {
		t.Errorf("a vol_data.json over the bound was read: %v", err)
	}

	for _, bad := range []string{`{"volumeHandle":"h","driverName":"../../../etc"}`, `{"volumeHandle":"h","driverName":"d","specVolID":"../x"}`} {
		d := t.TempDir()
		if err := os.WriteFile(filepath.Join(d, volDataFile), []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := parentOf(d).readVolData(d); ok || err == nil {
			t.Errorf("%s was accepted", bad)
		}
	}
}

// A volume directory is removed only as Skiff made it: a mount directory
// that is not empty keeps its files, and so does the directory.
func TestRemoveVolumeDirKeepsWhatItDidNotMake(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	if err := parentOf(dir).writeVolData(dir, volData{VolumeHandle: "h", DriverName: "d"}); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, publishTarget, "data")
	if err := os.MkdirAll(filepath.Dir(data), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(data, []byte("the volume's"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := parentOf(dir).removeVolumeDir(dir, publishTarget); err == nil {
		t.Error("no error for a mount directory that is not empty")
	}
	if _, err := os.Stat(data); err != nil {
		t.Errorf("a file in the mount directory was removed: %v", err)
	}
	if err := os.Remove(data); err != nil {
		t.Fatal(err)
	}
	if err := parentOf(dir).removeVolumeDir(dir, publishTarget); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the volume directory is left: %v", err)
	}
	// A symlink in the directory's place is not followed.
	target := t.TempDir()
	if err := os.WriteFile(filepath.Join(target, volDataFile), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, dir); err != nil {
		t.Fatal(err)
	}
	_ = parentOf(dir).removeVolumeDir(dir, publishTarget)
	if _, err := os.Stat(filepath.Join(target, volDataFile)); err != nil {
		t.Errorf("removal went through a symlink: %v", err)
	}
}

// FuzzVolData: whatever a vol_data.json holds, reading it never panics,
// and what it accepts leads to paths under the root directory only.
func FuzzVolData(f *testing.F) {
	f.Add([]byte(`{"specVolID":"v","volumeHandle":"h","driverName":"hostpath.csi.k8s.io","volumeLifecycleMode":"Persistent"}`))
	f.Add([]byte(`{"volumeHandle":"../../x","driverName":"../../../etc"}`))
	f.Add([]byte(`{"volumeHandle":"h","driverName":"d","specVolID":".."}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		root := t.TempDir()
		dir := filepath.Join(root, "pods", "uid", "volumes", podPluginDir, "v")
		if err := os.MkdirAll(dir, 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, volDataFile), b, 0o600); err != nil {
			t.Fatal(err)
		}
		v, ok, err := parentOf(dir).readVolData(dir)
		if !ok {
			if err == nil {
				t.Fatal("a vol_data.json refused without an error")
			}
			return
		}
		d := New(Config{RootDir: root})
		base := filepath.Join(root, "plugins", "kubernetes.io", "csi") + "/"
		if p := d.stagingPath(v.DriverName, v.VolumeHandle); !strings.HasPrefix(p, base) || strings.Contains(strings.TrimPrefix(p, base), "..") {
			t.Fatalf("driver %q handle %q: staging path %s is not under %s", v.DriverName, v.VolumeHandle, p, base)
		}
		if v.SpecVolID != "" {
			if p := filepath.Join(podVolumesDir(filepath.Join(root, "pods", "uid")), v.SpecVolID); filepath.Dir(p) != filepath.Dir(dir) {
				t.Fatalf("spec name %q leads to %s", v.SpecVolID, p)
			}
		}
	})
}
