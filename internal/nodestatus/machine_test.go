package nodestatus

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func write(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReadMachine(t *testing.T) {
	d := t.TempDir()
	p := hostPaths{
		meminfo:   write(t, filepath.Join(d, "meminfo"), "MemFree: 1 kB\nMemTotal:       24683656 kB\n"),
		hugepages: filepath.Join(d, "hugepages"),
		machineID: []string{filepath.Join(d, "missing"), write(t, filepath.Join(d, "machine-id"), "abc\n")},
		uuid:      []string{filepath.Join(d, "missing"), write(t, filepath.Join(d, "system-id"), "uuid-1\x00")},
		bootID:    write(t, filepath.Join(d, "boot_id"), "boot\n"),
		osRelease: write(t, filepath.Join(d, "os-release"), "NAME=Debian\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n"),
	}
	write(t, filepath.Join(d, "hugepages/hugepages-2048kB/nr_hugepages"), "16\n")
	write(t, filepath.Join(d, "hugepages/hugepages-1048576kB/nr_hugepages"), "0\n")
	m, err := readMachine(p)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]int64{2 * mi: 16, gi: 0}
	if m.memoryBytes != 24683656*1024 || !reflect.DeepEqual(m.hugePages, want) || m.machineID != "abc" ||
		m.systemUUID != "uuid-1" || m.bootID != "boot" || m.osImage != "Debian GNU/Linux 12 (bookworm)" || m.numCPU < 1 {
		t.Errorf("machine = %+v", m)
	}
	if got := hugePageResource(gi); got != "hugepages-1Gi" {
		t.Errorf("resource name %s", got)
	}
	if prettyName(filepath.Join(d, "missing")) != "Linux" {
		t.Error("default OS image")
	}
	p.meminfo = filepath.Join(d, "missing")
	if _, err := readMachine(p); err == nil {
		t.Error("no meminfo: want an error")
	}
}

func TestFilesystemBytes(t *testing.T) {
	b, err := filesystemBytes(t.TempDir())
	if err != nil || b <= 0 {
		t.Errorf("filesystemBytes = %d, %v", b, err)
	}
}
