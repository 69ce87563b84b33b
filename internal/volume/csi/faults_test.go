package csi

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func count(calls []string, name string) int {
	n := 0
	for _, c := range calls {
		if c == name {
			n++
		}
	}
	return n
}

// A Skiff that died before or during NodeStageVolume left the staging
// directory's vol_data.json, but the driver never staged the volume: the
// restarted Skiff stages it before publishing, rather than publishing an
// unstaged volume forever (the real hostpath driver refuses that).
func TestRestartedSkiffStagesBeforePublishing(t *testing.T) {
	f := newFixture(t, hostpathLike)
	staging := f.d.stagingPath(testDriver, "vol-c")
	must(t, f.d.root().writeVolData(filepath.Dir(staging), volData{VolumeHandle: "vol-c", DriverName: testDriver}))
	must(t, os.MkdirAll(staging, 0o750))
	restarted := f.newDrivers(t, fake.NewClientset(&storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: testDriver}, Spec: *hostpathLike}))
	pod := testPod("c")
	_, err := restarted.SetUp(context.Background(), pod, f.podDir(pod), Volume{SpecName: "pv-c", Driver: testDriver, Handle: "vol-c"})
	must(t, err)
	calls := strings.Join(f.srv.calls(), ",")
	if !strings.Contains(calls, "NodeStageVolume") || strings.Index(calls, "NodeStageVolume") > strings.Index(calls, "NodePublishVolume") {
		t.Errorf("calls %s: the volume was not staged before its publish", calls)
	}
	must(t, restarted.TearDownPod(context.Background(), f.podDir(pod)))
	if count(f.srv.calls(), "NodeUnstageVolume") != 1 {
		t.Errorf("not unstaged: %v", f.srv.calls())
	}
}

// Driver names that could lead out of Skiff's directories, from pods
// that no apiserver validated, are refused before anything is written
// or any driver asked.
func TestBadDriverNamesRefused(t *testing.T) {
	f := newFixture(t, hostpathLike)
	for _, name := range []string{"../../../../tmp/evil", "/", "a/b", "..", strings.Repeat("d", 300)} {
		pod := testPod("bad")
		_, err := f.d.SetUp(context.Background(), pod, f.podDir(pod), Volume{SpecName: "v", Driver: name, Inline: true})
		if err == nil || !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), "not a valid CSI driver name") {
			t.Errorf("driver %q: %v", name, err)
		}
	}
	if entries, err := os.ReadDir(f.root); err == nil && len(entries) != 0 {
		t.Errorf("written under the root: %v", entries)
	}
	if len(f.srv.calls()) != 0 {
		t.Errorf("the driver was called: %v", f.srv.calls())
	}
}
