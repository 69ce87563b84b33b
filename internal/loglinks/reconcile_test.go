package loglinks

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// After a restart: links of gone containers go, running containers get
// their missing links; everything else stays as it is.
func TestReconcile(t *testing.T) {
	f := newFixture(t)
	rt := &fakeRuntime{logPaths: map[string]string{}}
	id := func(c byte) string { return strings.Repeat(string(c), 64) }
	var (
		missing  = Container{"web", "ns", "main", id('a')} // running, link lost
		kept     = Container{"web", "ns", "side", id('b')} // running, linked
		exited   = Container{"job", "ns", "main", id('c')} // exited, its log gone, still known
		gone     = Container{"old", "ns", "main", id('d')} // removed while Skiff was down
		foreign  = Container{"their", "ns", "main", id('e')}
		regular  = Container{"file", "ns", "main", id('f')}
		outside  = Container{"out", "ns", "main", id('1')}
		dir      = Container{"dir", "ns", "main", id('2')}
		noLogYet = Container{"new", "ns", "main", id('3')}
	)
	rt.add(missing, runtimeapi.ContainerState_CONTAINER_RUNNING, f.logFile(missing))
	rt.add(kept, runtimeapi.ContainerState_CONTAINER_RUNNING, f.logFile(kept))
	must(t, f.l.Link(kept, f.logFile(kept)))
	keptIno := inode(t, f.path(kept))
	rt.add(exited, runtimeapi.ContainerState_CONTAINER_EXITED, f.logFile(exited))
	must(t, f.l.Link(exited, f.logFile(exited)))
	must(t, os.Remove(f.logFile(exited)))
	rt.add(noLogYet, runtimeapi.ContainerState_CONTAINER_RUNNING, filepath.Join(f.podLogs, "ns_new_uid", "main", "0.log"))

	// The runtime knows nothing of these.
	must(t, f.l.Link(gone, f.logFile(gone)))
	must(t, os.RemoveAll(filepath.Join(f.podLogs, "ns_old_uid")))
	must(t, f.l.Link(foreign, f.logFile(foreign))) // another kubelet's: resolves
	must(t, os.WriteFile(f.path(regular), []byte("not a link"), 0o644))
	must(t, os.Symlink("/nonexistent/0.log", f.path(outside))) // dangles, not below the pod logs
	must(t, os.Mkdir(f.path(dir), 0o755))
	unrelated := filepath.Join(f.links, "README")
	must(t, os.Symlink(filepath.Join(f.podLogs, "gone"), unrelated))

	if err := f.l.Reconcile(context.Background(), rt); err != nil {
		t.Fatal(err)
	}

	for _, c := range []Container{missing, kept, foreign} {
		want := filepath.Join(f.podLogs, c.Namespace+"_"+c.Pod+"_uid", c.Name, "0.log")
		if got := f.target(c); got != want {
			t.Errorf("link of %s points at %q, want %q", c.Pod, got, want)
		}
	}
	if inode(t, f.path(kept)) != keptIno {
		t.Error("an existing link of a running container was made anew")
	}
	if f.target(exited) == "" {
		t.Error("the link of an exited container the runtime still has was removed")
	}
	for _, c := range []Container{gone, noLogYet} {
		if _, err := os.Lstat(f.path(c)); !os.IsNotExist(err) {
			t.Errorf("link of %s: %v, want none", c.Pod, err)
		}
	}
	for _, p := range []string{f.path(regular), f.path(outside), f.path(dir), unrelated} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s was removed: %v", filepath.Base(p), err)
		}
	}
}
