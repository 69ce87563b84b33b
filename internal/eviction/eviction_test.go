package eviction

import (
	"context"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testclock "k8s.io/utils/clock/testing"
)

func pod(uid string, vols ...v1.Volume) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID(uid)}, Spec: v1.PodSpec{Volumes: vols}}
}

func emptyDir(name, limit string) v1.Volume {
	v := v1.Volume{Name: name, VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}
	if limit != "" {
		q := resource.MustParse(limit)
		v.EmptyDir.SizeLimit = &q
	}
	return v
}

func TestCheckEvictsOnlyPodsOverTheirLimit(t *testing.T) {
	root := t.TempDir()
	write := func(uid, vol string, size int) {
		dir := filepath.Join(root, uid, "volumes", "kubernetes.io~empty-dir", vol)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "data"), make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("over", "scratch", 2<<20)
	write("under", "scratch", 100<<10)
	write("nolimit", "scratch", 4<<20)
	pods := []*v1.Pod{
		pod("over", emptyDir("small", "1Mi"), emptyDir("scratch", "1Mi")),
		pod("under", emptyDir("scratch", "1Mi")),
		pod("nolimit", emptyDir("scratch", "")),
		pod("missing", emptyDir("scratch", "1Mi")), // not set up yet
	}
	evicted := map[types.UID]string{}
	m := New(Config{
		PodDir: func(uid types.UID) string { return filepath.Join(root, string(uid)) },
		Pods:   func() []*v1.Pod { return pods },
		Evict:  func(p *v1.Pod, msg string) { evicted[p.UID] = msg },
	})
	m.Check(context.Background())
	if len(evicted) != 1 {
		t.Fatalf("evicted %v, want only pod over", evicted)
	}
	if msg := evicted["over"]; !strings.HasPrefix(msg, `Usage of EmptyDir volume "scratch" exceeds the limit "1Mi".`) {
		t.Errorf("message %q", msg)
	}
}

// Run checks on its clock's ticks, not before the first.
func TestRunChecksOnTheClock(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "over", "volumes", "kubernetes.io~empty-dir", "scratch")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data"), make([]byte, 2<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	clock := testclock.NewFakeClock(time.Unix(1e9, 0))
	evicted := make(chan types.UID, 1)
	m := New(Config{
		Period: 10 * time.Second, Clock: clock,
		PodDir: func(uid types.UID) string { return filepath.Join(root, string(uid)) },
		Pods:   func() []*v1.Pod { return []*v1.Pod{pod("over", emptyDir("scratch", "1Mi"))} },
		Evict:  func(p *v1.Pod, _ string) { evicted <- p.UID },
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	defer func() { cancel(); <-done }()

	for !clock.HasWaiters() {
		goruntime.Gosched() // Run has made its ticker
	}
	select {
	case uid := <-evicted:
		t.Fatalf("%s evicted before the first tick", uid)
	default:
	}
	clock.Step(10 * time.Second)
	if uid := <-evicted; uid != "over" {
		t.Errorf("evicted %s, want over", uid)
	}
}
