package file

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/internal/podsource"
)

const waitTimeout = 5 * time.Second

func startRun(t *testing.T, path string, period time.Duration) (<-chan podsource.Update, *Source) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan podsource.Update)
	s := New(Config{Path: path, NodeName: testNode, Period: period})
	done := make(chan struct{})
	go func() {
		s.Run(ctx, out)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return out, s
}

// waitUpdate returns the first update that satisfies ok, failing the test
// if none comes in time.
func waitUpdate(t *testing.T, ch <-chan podsource.Update, what string, ok func(podsource.Update) bool) podsource.Update {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		select {
		case u := <-ch:
			if u.Source != podsource.File {
				t.Fatalf("update from source %q, want file", u.Source)
			}
			if ok(u) {
				return u
			}
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func havePods(names string) func(podsource.Update) bool {
	return func(u podsource.Update) bool { return podNames(u.Pods) == names }
}

func expectNoUpdate(t *testing.T, ch <-chan podsource.Update, d time.Duration) {
	t.Helper()
	select {
	case u := <-ch:
		t.Fatalf("unexpected update with pods %q", podNames(u.Pods))
	case <-time.After(d):
	}
}

func TestRunMissingDirectoryAppears(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "manifests")
	ch, _ := startRun(t, dir, 50*time.Millisecond)

	first := waitUpdate(t, ch, "initial snapshot", func(podsource.Update) bool { return true })
	if first.Pods == nil || len(first.Pods) != 0 {
		t.Fatalf("initial snapshot = %v, want empty and non-nil", first.Pods)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "web.yaml"), podYAML("web", "nginx"))
	waitUpdate(t, ch, "pod from the new directory", havePods("web-node-1"))
	// Polls keep running, but an unchanged set is not sent again.
	expectNoUpdate(t, ch, 300*time.Millisecond)

	// Once it exists the directory is watched: a second file shows up.
	writeFile(t, filepath.Join(dir, "db.yaml"), podYAML("db", "postgres"))
	waitUpdate(t, ch, "second pod", havePods("db-node-1,web-node-1"))
}

// With an hour-long period only file events can deliver these updates.
func TestRunWatchesDirectory(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.yaml")
	writeFile(t, a, podYAML("web", "nginx:1"))
	ch, s := startRun(t, dir, time.Hour)

	u := waitUpdate(t, ch, "initial snapshot", havePods("web-node-1"))
	uid := u.Pods[0].UID

	writeFile(t, a, podYAML("web", "nginx:2"))
	u = waitUpdate(t, ch, "edited pod", func(u podsource.Update) bool {
		return len(u.Pods) == 1 && u.Pods[0].Spec.Containers[0].Image == "nginx:2"
	})
	if u.Pods[0].UID == uid {
		t.Error("edited manifest kept its UID")
	}
	uid = u.Pods[0].UID

	b := filepath.Join(dir, "b.yaml")
	if err := os.Rename(a, b); err != nil {
		t.Fatal(err)
	}
	u = waitUpdate(t, ch, "renamed pod", func(u podsource.Update) bool {
		return len(u.Pods) == 1 && u.Pods[0].UID != uid
	})
	if u.Pods[0].Name != "web-node-1" {
		t.Errorf("renamed pod name = %s", u.Pods[0].Name)
	}

	// Renaming to a hidden file takes the pod away.
	if err := os.Rename(b, filepath.Join(dir, ".b.yaml")); err != nil {
		t.Fatal(err)
	}
	waitUpdate(t, ch, "empty snapshot after hiding", havePods(""))

	// A burst of files is coalesced and all of them arrive.
	for _, n := range []string{"p1", "p2", "p3", "p4"} {
		writeFile(t, filepath.Join(dir, n+".yaml"), podYAML(n, "busybox"))
	}
	waitUpdate(t, ch, "burst", havePods("p1-node-1,p2-node-1,p3-node-1,p4-node-1"))

	// A bad file is skipped and reported; the others are unaffected.
	bad := filepath.Join(dir, "p0.yaml")
	writeFile(t, bad, "apiVersion: v1\nkind: List\n")
	deadline := time.Now().Add(waitTimeout)
	for s.Errors()[bad] == nil {
		if time.Now().After(deadline) {
			t.Fatal("bad file not reported")
		}
		time.Sleep(10 * time.Millisecond)
	}
	expectNoUpdate(t, ch, 200*time.Millisecond)

	if err := os.Remove(filepath.Join(dir, "p2.yaml")); err != nil {
		t.Fatal(err)
	}
	waitUpdate(t, ch, "deletion", havePods("p1-node-1,p3-node-1,p4-node-1"))
}

func TestRunWatchesSingleFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pod.yaml")
	writeFile(t, path, podYAML("web", "nginx:1"))
	ch, _ := startRun(t, path, time.Hour)
	waitUpdate(t, ch, "initial snapshot", havePods("web-node-1"))

	// Editors and config tools replace files by renaming over them.
	tmp := filepath.Join(dir, ".pod.yaml.tmp")
	writeFile(t, tmp, podYAML("web", "nginx:2"))
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	waitUpdate(t, ch, "replaced file", func(u podsource.Update) bool {
		return len(u.Pods) == 1 && u.Pods[0].Spec.Containers[0].Image == "nginx:2"
	})
	writeFile(t, path, podYAML("web", "nginx:3"))
	waitUpdate(t, ch, "edited file", func(u podsource.Update) bool {
		return len(u.Pods) == 1 && u.Pods[0].Spec.Containers[0].Image == "nginx:3"
	})
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	waitUpdate(t, ch, "removed file", havePods(""))
}

// The parent of a missing directory is watched, so it is picked up at once.
func TestRunMissingDirectoryWatchedViaParent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "manifests")
	ch, _ := startRun(t, dir, time.Hour)
	waitUpdate(t, ch, "initial snapshot", havePods(""))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// No pause needed: the resync the mkdir triggers watches the new
	// directory before reading it.
	writeFile(t, filepath.Join(dir, "web.yaml"), podYAML("web", "nginx"))
	waitUpdate(t, ch, "pod from the new directory", havePods("web-node-1"))
}

func TestRunDirectoryRemovedAndRecreated(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "manifests")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "web.yaml"), podYAML("web", "nginx"))
	ch, _ := startRun(t, dir, 50*time.Millisecond)
	waitUpdate(t, ch, "initial snapshot", havePods("web-node-1"))

	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	waitUpdate(t, ch, "empty snapshot", havePods(""))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "web.yaml"), podYAML("web", "nginx"))
	waitUpdate(t, ch, "pod again", havePods("web-node-1"))
}

func TestRunReturnsWhenCancelledWhileSending(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		// Nobody reads out, so Run blocks on its first send.
		New(Config{Path: t.TempDir(), NodeName: testNode}).Run(ctx, make(chan podsource.Update))
		close(done)
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(waitTimeout):
		t.Fatal("Run did not return after cancel")
	}
}
