package logs

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
)

// reopeningRuntime is the CRI fake plus what a runtime does on
// ReopenContainerLog: it creates the log file anew.
type reopeningRuntime struct {
	*critest.FakeRuntimeService
}

func (r reopeningRuntime) ReopenContainerLog(ctx context.Context, id string) error {
	if err := r.FakeRuntimeService.ReopenContainerLog(ctx, id); err != nil {
		return err
	}
	resp, err := r.ContainerStatus(ctx, id, false)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(resp.Status.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	return f.Close()
}

func fakeContainer(id, logPath string, state runtimeapi.ContainerState) *critest.FakeContainer {
	return &critest.FakeContainer{ContainerStatus: runtimeapi.ContainerStatus{
		Id: id, State: state, LogPath: logPath, Metadata: &runtimeapi.ContainerMetadata{Name: id},
	}}
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	must(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

func TestRotation(t *testing.T) {
	dir := t.TempDir()
	big, small, stopped := filepath.Join(dir, "big.log"), filepath.Join(dir, "small.log"), filepath.Join(dir, "stopped.log")
	for p, size := range map[string]int{big: 2000, small: 10, stopped: 5000} {
		must(t, os.WriteFile(p, []byte(strings.Repeat("x", size)), 0o640))
	}
	fake := critest.NewFakeRuntimeService()
	fake.SetFakeContainers([]*critest.FakeContainer{
		fakeContainer("big", big, runtimeapi.ContainerState_CONTAINER_RUNNING),
		fakeContainer("small", small, runtimeapi.ContainerState_CONTAINER_RUNNING),
		fakeContainer("stopped", stopped, runtimeapi.ContainerState_CONTAINER_EXITED),
	})
	now := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	r := NewRotator(RotateConfig{
		Runtime: reopeningRuntime{fake}, MaxSize: 1000, MaxFiles: 3, Workers: 2,
		Now: func() time.Time { return now },
	})
	ctx := context.Background()

	must(t, r.RotateAll(ctx))
	want := []string{"big.log", "big.log.20250301-100000", "small.log", "stopped.log"}
	if got := listDir(t, dir); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("after the first rotation: %v, want %v", got, want)
	}
	if fi, _ := os.Stat(big); fi.Size() != 0 {
		t.Errorf("the reopened log has %d bytes", fi.Size())
	}

	// The container writes on; the next rotation compresses the older file.
	must(t, os.WriteFile(big, []byte(strings.Repeat("y", 1500)), 0o640))
	now = now.Add(10 * time.Second)
	must(t, r.RotateAll(ctx))
	want = []string{"big.log", "big.log.20250301-100000.gz", "big.log.20250301-100010", "small.log", "stopped.log"}
	if got := listDir(t, dir); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("after the second rotation: %v, want %v", got, want)
	}
	zf, err := os.Open(filepath.Join(dir, "big.log.20250301-100000.gz"))
	must(t, err)
	zr, err := gzip.NewReader(zf)
	must(t, err)
	content, err := io.ReadAll(zr)
	must(t, err)
	zf.Close()
	if string(content) != strings.Repeat("x", 2000) {
		t.Errorf("the compressed log holds %d bytes, not the original", len(content))
	}

	// MaxFiles 3: the new log, the one rotated now, and one older.
	must(t, os.WriteFile(big, []byte(strings.Repeat("z", 1500)), 0o640))
	now = now.Add(10 * time.Second)
	must(t, r.RotateAll(ctx))
	want = []string{"big.log", "big.log.20250301-100010.gz", "big.log.20250301-100020", "small.log", "stopped.log"}
	if got := listDir(t, dir); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("after the third rotation: %v, want %v", got, want)
	}

	reopens := 0
	for _, c := range fake.GetCalls() {
		if c == "ReopenContainerLog" {
			reopens++
		}
	}
	if reopens != 3 {
		t.Errorf("%d ReopenContainerLog calls, want 3", reopens)
	}
}

func TestRotationEdges(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "0.log")
	must(t, os.WriteFile(p, []byte(strings.Repeat("x", 100)), 0o640))
	// Leftovers of an interrupted compression: a temporary file, and an
	// original whose .gz is complete.
	for _, f := range []string{"0.log.20250101-000000", "0.log.20250101-000000.gz", "0.log.20250101-000005.gz.tmp"} {
		must(t, os.WriteFile(filepath.Join(dir, f), []byte("old"), 0o640))
	}
	fake := critest.NewFakeRuntimeService()
	fake.SetFakeContainers([]*critest.FakeContainer{fakeContainer("c", p, runtimeapi.ContainerState_CONTAINER_RUNNING)})
	now := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	r := NewRotator(RotateConfig{Runtime: reopeningRuntime{fake}, MaxSize: 50, MaxFiles: 5, Now: func() time.Time { return now }})

	// A failed reopen puts the log back under its name.
	fake.InjectError("ReopenContainerLog", errors.New("runtime says no"))
	must(t, r.RotateAll(context.Background()))
	want := []string{"0.log", "0.log.20250101-000000.gz"}
	if got := listDir(t, dir); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("after a failed reopen: %v, want %v", got, want)
	}
	if b, _ := os.ReadFile(p); len(b) != 100 {
		t.Errorf("the log has %d bytes after the failed reopen, want its 100", len(b))
	}

	// A log that vanished is reopened, not rotated.
	must(t, os.Remove(p))
	must(t, r.RotateAll(context.Background()))
	if _, err := os.Stat(p); err != nil {
		t.Errorf("the missing log was not reopened: %v", err)
	}
}
