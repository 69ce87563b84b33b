package podruntime

import (
	"context"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/loglinks"
)

// recordedLinks records what the runtime manager asks of the log links.
type recordedLinks struct {
	mu       sync.Mutex
	linked   map[string]string // container ID → log path
	unlinked []loglinks.Container
}

func (r *recordedLinks) Link(c loglinks.Container, logPath string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.linked[c.ID] = logPath
	return nil
}

func (r *recordedLinks) Unlink(c loglinks.Container) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unlinked = append(r.unlinked, c)
	return nil
}

// A started container is linked to its log file; the links of removed
// containers go: a dead instance pruned after restarts, then every
// container of a removed pod.
func TestLogLinksFollowContainers(t *testing.T) {
	f := newFixture(t, v1.RestartPolicyAlways)
	links := &recordedLinks{linked: map[string]string{}}
	f.m.cfg.LogLinks = links
	ctx := context.Background()
	f.sync()
	first := f.status().FindContainer("app")
	want := filepath.Join(PodLogsDir(f.m.cfg.PodLogsDir, "ns", "p", "uid-1"), "app", "0.log")
	if got := links.linked[first.ID]; got != want {
		t.Fatalf("link of the started container to %q, want %q", got, want)
	}
	// Two restarts: the first instance is the oldest of two dead ones and
	// is removed with its link.
	ids := []string{first.ID}
	for i := 1; i <= 2; i++ {
		f.exit("app", 1)
		f.clock.Step(backOffMax * 2)
		f.sync()
		ids = append(ids, f.status().FindContainer("app").ID)
	}
	f.sync()
	if len(links.linked) != 3 {
		t.Errorf("%d containers linked, want 3: %v", len(links.linked), links.linked)
	}
	oldest := loglinks.Container{Pod: "p", Namespace: "ns", Name: "app", ID: first.ID}
	if !reflect.DeepEqual(links.unlinked, []loglinks.Container{oldest}) {
		t.Fatalf("unlinked %+v, want only the pruned first instance", links.unlinked)
	}
	if err := f.m.KillPod(ctx, f.pod, f.status(), nil); err != nil {
		t.Fatal(err)
	}
	links.unlinked = nil
	if err := f.m.RemovePod(ctx, f.status()); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, c := range links.unlinked {
		if c.Pod != "p" || c.Namespace != "ns" || c.Name != "app" {
			t.Errorf("unlinked %+v", c)
		}
		got[c.ID] = true
	}
	if !got[ids[1]] || !got[ids[2]] || len(got) != 2 {
		t.Errorf("removing the pod unlinked %v, want %v", got, ids[1:])
	}
}
