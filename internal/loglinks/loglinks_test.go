package loglinks

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/cri"
)

const id64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestName(t *testing.T) {
	long := strings.Repeat("p", 253)
	for _, tc := range []struct {
		c      Container
		want   string
		wantID string // "" when the name has lost it
	}{
		{Container{"web-0", "default", "nginx", id64}, "web-0_default_nginx-" + id64 + ".log", id64},
		{Container{"a.b-c", "kube-system", "side-car", "abcdef"}, "a.b-c_kube-system_side-car-abcdef.log", "abcdef"},
		// Upstream cuts names over ext4's 255 bytes, ID and all.
		{Container{long, "ns", "c", id64}, long[:251] + ".log", ""},
	} {
		got := Name(tc.c)
		if got != tc.want {
			t.Errorf("Name(%+v) = %q, want %q", tc.c, got, tc.want)
		}
		if len(got) > 255 {
			t.Errorf("Name(%+v) has %d bytes", tc.c, len(got))
		}
		id, ok := idOf(got)
		if ok != (tc.wantID != "") || id != tc.wantID {
			t.Errorf("idOf(%q) = %q, %v; want %q", got, id, ok, tc.wantID)
		}
	}
	for _, name := range []string{"x.log", "a_b-" + id64 + ".log", "a_b_c_d-" + id64 + ".log", "a_b_c-" + id64, "a_b-c_d.log", "a_b_c-12.log"} {
		if id, ok := idOf(name); ok {
			t.Errorf("idOf(%q) = %q, want none", name, id)
		}
	}
}

// fixture is a pod logs directory and a links directory.
type fixture struct {
	t              *testing.T
	podLogs, links string
	l              *Links
}

func newFixture(t *testing.T) *fixture {
	root := t.TempDir()
	f := &fixture{t: t, podLogs: filepath.Join(root, "pods"), links: filepath.Join(root, "containers")}
	l, err := Open(f.links, f.podLogs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	f.l = l
	return f
}

// logFile creates a container's log file and returns its path.
func (f *fixture) logFile(c Container) string {
	p := filepath.Join(f.podLogs, c.Namespace+"_"+c.Pod+"_uid", c.Name, "0.log")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("2026-11-27T00:00:00Z stdout F hello\n"), 0o644); err != nil {
		f.t.Fatal(err)
	}
	return p
}

func (f *fixture) path(c Container) string { return filepath.Join(f.links, Name(c)) }

// target is where the link of c points, "" if there is no symlink.
func (f *fixture) target(c Container) string {
	s, err := os.Readlink(f.path(c))
	if err != nil {
		return ""
	}
	return s
}

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

func TestLinkAndUnlink(t *testing.T) {
	f := newFixture(t)
	c := Container{"web", "ns", "main", id64}
	log := f.logFile(c)
	if err := f.l.Link(c, log); err != nil {
		t.Fatal(err)
	}
	if got := f.target(c); got != log {
		t.Fatalf("link points at %q, want %q", got, log)
	}
	b, err := os.ReadFile(f.path(c))
	if err != nil || !strings.Contains(string(b), "hello") {
		t.Errorf("reading through the link: %q, %v", b, err)
	}
	// Again (a resync, Reconcile after a start): kept as it is.
	ino := inode(t, f.path(c))
	if err := f.l.Link(c, log); err != nil {
		t.Errorf("linking again: %v", err)
	}
	if inode(t, f.path(c)) != ino {
		t.Error("linking again replaced the link")
	}
	if err := f.l.Unlink(c); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(f.path(c)); !os.IsNotExist(err) {
		t.Errorf("link still there after Unlink: %v", err)
	}
	if _, err := os.Stat(log); err != nil {
		t.Errorf("Unlink touched the log file: %v", err)
	}
	if err := f.l.Unlink(c); err != nil {
		t.Errorf("unlinking a missing link: %v", err)
	}
}

func TestLinkRefuses(t *testing.T) {
	f := newFixture(t)
	c := Container{"web", "ns", "main", id64}
	// No log file (yet): no dangling link, as upstream.
	if err := f.l.Link(c, filepath.Join(f.podLogs, "ns_web_uid", "main", "0.log")); err != nil {
		t.Errorf("linking a missing log: %v", err)
	}
	if _, err := os.Lstat(f.path(c)); !os.IsNotExist(err) {
		t.Errorf("a link to a missing log was made: %v", err)
	}
	// A file outside the pod logs directory is never linked.
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{outside, filepath.Join(f.podLogs, "..", filepath.Base(outside)), "relative/0.log", f.podLogs} {
		if err := f.l.Link(c, p); err == nil {
			t.Errorf("Link to %q: no error", p)
		}
		if got := f.target(c); got != "" {
			t.Fatalf("Link to %q made a link to %q", p, got)
		}
	}
	// A link of that name to somewhere else is not replaced.
	other := Container{"web", "ns", "other", "fedcba9876"}
	log := f.logFile(c)
	if err := os.Symlink(f.logFile(other), f.path(c)); err != nil {
		t.Fatal(err)
	}
	if err := f.l.Link(c, log); err == nil {
		t.Error("Link over another link: no error")
	}
	if got := f.target(c); got != f.logFile(other) {
		t.Errorf("the other link now points at %q", got)
	}
}

// Unlink removes only symlinks: a file or directory of a link's name is
// someone else's; a symlink pointing elsewhere goes, what it points at
// stays.
func TestUnlinkUnsafeEntries(t *testing.T) {
	f := newFixture(t)
	file := Container{"web", "ns", "file", id64}
	dir := Container{"web", "ns", "dir", id64}
	evil := Container{"web", "ns", "evil", id64}
	must(t, os.WriteFile(f.path(file), []byte("not a link"), 0o644))
	must(t, os.Mkdir(f.path(dir), 0o755))
	victim := t.TempDir()
	must(t, os.WriteFile(filepath.Join(victim, "precious"), []byte("x"), 0o644))
	must(t, os.Symlink(victim, f.path(evil)))

	for _, c := range []Container{file, dir} {
		if err := f.l.Unlink(c); err == nil {
			t.Errorf("Unlink(%s): no error for a non-symlink", c.Name)
		}
		if _, err := os.Lstat(f.path(c)); err != nil {
			t.Errorf("Unlink(%s) removed a non-symlink: %v", c.Name, err)
		}
	}
	if err := f.l.Unlink(evil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(f.path(evil)); !os.IsNotExist(err) {
		t.Errorf("the symlink is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(victim, "precious")); err != nil {
		t.Errorf("what the symlink pointed at was touched: %v", err)
	}
}

// The directory is used through the descriptor Open took: swapping its
// path for a symlink afterwards sends nothing elsewhere.
func TestHeldDirectory(t *testing.T) {
	f := newFixture(t)
	c := Container{"web", "ns", "main", id64}
	elsewhere := t.TempDir()
	must(t, os.Rename(f.links, f.links+".moved"))
	must(t, os.Symlink(elsewhere, f.links))
	must(t, f.l.Link(c, f.logFile(c)))
	if entries, _ := os.ReadDir(elsewhere); len(entries) != 0 {
		t.Errorf("a link was made through the swapped path: %v", entries)
	}
	if _, err := os.Lstat(filepath.Join(f.links+".moved", Name(c))); err != nil {
		t.Errorf("no link in the directory opened: %v", err)
	}
}

// fakeRuntime lists containers and gives their log paths.
type fakeRuntime struct {
	containers []*runtimeapi.Container
	logPaths   map[string]string
}

func (r *fakeRuntime) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return r.containers, nil
}

func (r *fakeRuntime) ContainerStatus(_ context.Context, id string, _ bool) (*runtimeapi.ContainerStatusResponse, error) {
	p, ok := r.logPaths[id]
	if !ok {
		return nil, status.Error(codes.NotFound, "no such container")
	}
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: id, LogPath: p}}, nil
}

func (r *fakeRuntime) add(c Container, state runtimeapi.ContainerState, logPath string) {
	r.containers = append(r.containers, &runtimeapi.Container{Id: c.ID, State: state, Labels: map[string]string{
		cri.PodNameLabel: c.Pod, cri.PodNamespaceLabel: c.Namespace, cri.ContainerNameLabel: c.Name,
	}})
	r.logPaths[c.ID] = logPath
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
