package file

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/podsource"
)

const testNode = "node-1"

func podYAML(name, image string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n  containers:\n  - name: c\n    image: %s\n", name, image)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// errorLog records OnError calls.
type errorLog struct{ calls []string }

func (l *errorLog) record(path string, err error) {
	l.calls = append(l.calls, filepath.Base(path)+": "+err.Error())
}

func newScanSource(path string) (*Source, *errorLog) {
	log := &errorLog{}
	return New(Config{Path: path, NodeName: testNode, OnError: log.record}), log
}

func mustScan(t *testing.T, s *Source) []*v1.Pod {
	t.Helper()
	pods, ok := s.scan()
	if !ok {
		t.Fatalf("scan failed: %v", s.Errors())
	}
	return pods
}

func podNames(pods []*v1.Pod) string {
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	return strings.Join(names, ",")
}

func TestScanSkipsBadFiles(t *testing.T) {
	tests := []struct {
		file, content, wantErr string
	}{
		{"bad.yaml", "kind: Pod\nmetadata: [\n", "invalid YAML"},
		{"unknown.yaml", podYAML("u", "x") + "    imagePolicy: Always\n", `unknown field "spec.containers[0].imagePolicy"`},
		{"list.yaml", "apiVersion: v1\nkind: List\nitems: []\n", "kind List is not supported"},
		{"podlist.json", `{"apiVersion":"v1","kind":"PodList","items":[]}`, "kind PodList is not supported"},
		{"service.yml", "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n", "kind Service is not supported"},
		{"invalid.yaml", podYAML("inv", `""`), "spec.containers[0].image: Required value"},
		{"empty.yaml", "", "manifest is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "a-good.yaml"), podYAML("good", "nginx:1"))
			writeFile(t, filepath.Join(dir, tt.file), tt.content)
			writeFile(t, filepath.Join(dir, "z-good.json"), `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"other"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`)
			s, log := newScanSource(dir)

			pods := mustScan(t, s)
			if got := podNames(pods); got != "good-node-1,other-node-1" {
				t.Errorf("pods = %s, want good-node-1,other-node-1", got)
			}
			errs := s.Errors()
			bad := filepath.Join(dir, tt.file)
			if len(errs) != 1 || errs[bad] == nil || !strings.Contains(errs[bad].Error(), tt.wantErr) {
				t.Errorf("Errors() = %v, want only %s containing %q", errs, tt.file, tt.wantErr)
			}
			if len(log.calls) != 1 {
				t.Errorf("OnError calls = %q, want one", log.calls)
			}
		})
	}
}

func TestScanIgnoresOtherEntries(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "web.yaml"), podYAML("web", "nginx"))
	writeFile(t, filepath.Join(dir, ".hidden.yaml"), podYAML("hidden", "nginx"))
	writeFile(t, filepath.Join(dir, "notes.txt"), "not a manifest")
	writeFile(t, filepath.Join(dir, "web.yaml.bak"), podYAML("bak", "nginx"))
	if err := os.Mkdir(filepath.Join(dir, "sub.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "sub.yaml", "nested.yaml"), podYAML("nested", "nginx"))
	// A symlinked manifest is read, as in ConfigMap-style directories.
	writeFile(t, filepath.Join(dir, ".target"), podYAML("linked", "nginx"))
	if err := os.Symlink(".target", filepath.Join(dir, "linked.yml")); err != nil {
		t.Fatal(err)
	}
	s, _ := newScanSource(dir)
	if got := podNames(mustScan(t, s)); got != "linked-node-1,web-node-1" {
		t.Errorf("pods = %s, want linked-node-1,web-node-1", got)
	}
	if errs := s.Errors(); len(errs) != 0 {
		t.Errorf("Errors() = %v, want none", errs)
	}
}

func TestScanSingleFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pod.manifest") // any extension when named directly
	writeFile(t, path, podYAML("web", "nginx"))
	s, _ := newScanSource(path)
	if got := podNames(mustScan(t, s)); got != "web-node-1" {
		t.Errorf("pods = %s, want web-node-1", got)
	}
}

func TestScanMissingPath(t *testing.T) {
	s, _ := newScanSource(filepath.Join(t.TempDir(), "nope"))
	if pods := mustScan(t, s); pods == nil || len(pods) != 0 {
		t.Errorf("pods = %v, want an empty, non-nil list", pods)
	}
}

func TestScanNameCollision(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	writeFile(t, a, podYAML("web", "nginx:1"))
	writeFile(t, b, podYAML("web", "nginx:2"))
	s, log := newScanSource(dir)

	pods := mustScan(t, s)
	if len(pods) != 1 || pods[0].Spec.Containers[0].Image != "nginx:1" {
		t.Fatalf("pods = %v, want only a.yaml's web", pods)
	}
	if err := s.Errors()[b]; err == nil || !strings.Contains(err.Error(), "pod default/web-node-1 is already defined by "+a) {
		t.Errorf("b.yaml error = %v, want it to name a.yaml", err)
	}
	mustScan(t, s)
	if len(log.calls) != 1 {
		t.Errorf("OnError calls = %q, want the collision once", log.calls)
	}

	// Once a.yaml goes, b.yaml's pod takes the name.
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	pods = mustScan(t, s)
	if len(pods) != 1 || pods[0].Spec.Containers[0].Image != "nginx:2" {
		t.Fatalf("pods = %v, want b.yaml's web", pods)
	}
	if errs := s.Errors(); len(errs) != 0 {
		t.Errorf("Errors() = %v, want none", errs)
	}
}

func TestScanReportsOncePerContent(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	writeFile(t, bad, podYAML("bad", `""`))
	s, log := newScanSource(dir)
	for range 3 {
		mustScan(t, s)
	}
	if len(log.calls) != 1 {
		t.Fatalf("OnError calls after 3 scans = %q, want 1", log.calls)
	}
	// Changed content with the same error is reported again.
	writeFile(t, bad, "# edited\n"+podYAML("bad", `""`))
	mustScan(t, s)
	if len(log.calls) != 2 {
		t.Fatalf("OnError calls after edit = %q, want 2", log.calls)
	}
	// Fixed, then broken again with the original content: reported again.
	writeFile(t, bad, podYAML("bad", "nginx"))
	if got := podNames(mustScan(t, s)); got != "bad-node-1" {
		t.Fatalf("pods = %s after fix", got)
	}
	writeFile(t, bad, podYAML("bad", `""`))
	mustScan(t, s)
	if len(log.calls) != 3 {
		t.Fatalf("OnError calls after re-break = %q, want 3", log.calls)
	}
}

func TestScanSeenAnnotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "web.yaml")
	writeFile(t, path, podYAML("web", "nginx:1"))
	s, _ := newScanSource(dir)
	clock := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	s.now = func() time.Time { return clock }

	first := mustScan(t, s)[0]
	if got := first.Annotations[podsource.ConfigSeenAnnotation]; got != "2025-01-02T03:04:05.000000006Z" {
		t.Errorf("seen = %q", got)
	}
	clock = clock.Add(time.Hour)
	if again := mustScan(t, s)[0]; again.Annotations[podsource.ConfigSeenAnnotation] != first.Annotations[podsource.ConfigSeenAnnotation] {
		t.Errorf("seen moved for an unchanged pod: %q", again.Annotations[podsource.ConfigSeenAnnotation])
	}
	writeFile(t, path, podYAML("web", "nginx:2"))
	changed := mustScan(t, s)[0]
	if changed.UID == first.UID {
		t.Fatal("changed manifest kept its UID")
	}
	if got := changed.Annotations[podsource.ConfigSeenAnnotation]; got != "2025-01-02T04:04:05.000000006Z" {
		t.Errorf("seen of the new pod = %q, want the new time", got)
	}
	if changed.Annotations[podsource.ConfigHashAnnotation] != string(changed.UID) {
		t.Error("config.hash is not the UID")
	}
}

func TestScanUIDStableAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "web.yaml"), podYAML("web", "nginx"))
	s1, _ := newScanSource(dir)
	s2, _ := newScanSource(dir)
	if u1, u2 := mustScan(t, s1)[0].UID, mustScan(t, s2)[0].UID; u1 != u2 {
		t.Errorf("UIDs %s and %s differ for the same file", u1, u2)
	}
}

func TestScanPathNotAFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	s, log := newScanSource(path)
	for range 2 {
		if _, ok := s.scan(); ok {
			t.Fatal("scan of a FIFO succeeded")
		}
	}
	if err := s.Errors()[path]; err == nil || !strings.Contains(err.Error(), "neither a directory nor a regular file") {
		t.Errorf("Errors() = %v, want the path's error", s.Errors())
	}
	if len(log.calls) != 1 {
		t.Errorf("OnError calls = %q, want one", log.calls)
	}
}
