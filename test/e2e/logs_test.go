//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/logs"
)

// criLogSource is a logs.Source over a running Skiff: the pod's status
// from its /pods names the container instance (as the kubelet picks it),
// and containerd its log file and whether it runs. It lets the tests serve
// /containerLogs in-process, against real containers and real log files,
// until the authenticated :10250 server mounts the kubelet's own source.
type criLogSource struct{ n *node }

func (s criLogSource) ContainerLog(ctx context.Context, namespace, name, container string, previous bool) (logs.Log, error) {
	p, err := s.n.pod(name)
	if err != nil {
		return logs.Log{}, err
	}
	if p == nil || p.Namespace != namespace {
		return logs.Log{}, logs.NotFound("pod %q does not exist", name)
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != container {
			continue
		}
		id := cs.ContainerID
		if previous {
			if cs.LastTerminationState.Terminated == nil {
				return logs.Log{}, fmt.Errorf("previous terminated container %q in pod %q not found", container, name)
			}
			id = cs.LastTerminationState.Terminated.ContainerID
		}
		id = strings.TrimPrefix(id, "containerd://")
		resp, err := s.n.runtime().ContainerStatus(ctx, id, false)
		if err != nil {
			return logs.Log{}, err
		}
		running := func(ctx context.Context) bool {
			r, err := s.n.runtime().ContainerStatus(ctx, id, false)
			return err == nil && r.Status.State == runtimeapi.ContainerState_CONTAINER_RUNNING
		}
		return logs.Log{Path: resp.Status.LogPath, Running: running}, nil
	}
	return logs.Log{}, logs.NotFound("container %q not found in pod %q", container, name)
}

// The kubelet API's /containerLogs, served in-process by the logs
// handler on a real container's real log: previous (the instance before a
// restart), stream selection, a line longer than containerd's 16 KiB
// records joined whole, tailLines, timestamps, sinceSeconds, limitBytes,
// and follow until the container stops.
func TestContainerLogsHandler(t *testing.T) {
	n := newPrivateNode(t)
	// The first run prints and fails; the restarted one ticks until TERM.
	script := `if [ ! -f /data/ran ]; then touch /data/ran; echo first-run; echo to-stderr >&2; ` +
		`head -c 20000 /dev/zero | tr '\000' a; echo; exit 1; fi; ` +
		`echo second-run; trap 'exit 0' TERM; i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.2; done`
	n.writeManifest("talker.yaml", staticPod("talker", script, `  volumes:
  - name: data
    emptyDir: {}
`)+`    volumeMounts:
    - name: data
      mountPath: /data
`)
	n.start()
	name := "talker-" + nodeName
	var p *v1.Pod
	waitFor(t, 60*time.Second, "the restarted container running", func() (bool, error) {
		got, err := n.pod(name)
		if err != nil || got == nil || len(got.Status.ContainerStatuses) == 0 {
			return false, nil
		}
		cs := got.Status.ContainerStatuses[0]
		p = got
		return cs.RestartCount == 1 && cs.State.Running != nil && cs.LastTerminationState.Terminated != nil, nil
	})
	srv := httptest.NewServer(logs.Handler(criLogSource{n}))
	defer srv.Close()
	get := func(query string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + "/containerLogs/default/" + name + "/main?" + query)
		must(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		must(t, err)
		return resp.StatusCode, string(b)
	}

	long := strings.Repeat("a", 20000)
	if code, body := get("previous=true&stream=Stdout"); code != 200 || body != "first-run\n"+long+"\n" {
		t.Errorf("previous stdout: %d, %d bytes, %q...", code, len(body), body[:min(len(body), 40)])
	}
	// containerd wrote the long line as partial records.
	prev := strings.TrimPrefix(p.Status.ContainerStatuses[0].LastTerminationState.Terminated.ContainerID, "containerd://")
	resp, err := n.runtime().ContainerStatus(context.Background(), prev, false)
	must(t, err)
	raw, err := os.ReadFile(resp.Status.LogPath)
	must(t, err)
	if !bytes.Contains(raw, []byte(" stdout P a")) {
		t.Errorf("the previous log has no partial record: the long line did not test joining")
	}
	if code, body := get("previous=true&stream=Stderr"); code != 200 || body != "to-stderr\n" {
		t.Errorf("previous stderr: %d %q", code, body)
	}
	// The runtime copies stdout and stderr apart, so either may have
	// been written last: the last line is the file's last record's.
	lastLine := long + "\n"
	if recs := strings.Split(strings.TrimSpace(string(raw)), "\n"); strings.Contains(recs[len(recs)-1], " stderr F ") {
		lastLine = "to-stderr\n"
	}
	if code, body := get("previous=true&tailLines=1"); code != 200 || body != lastLine {
		t.Errorf("previous, last line: %d, %d bytes, want %d", code, len(body), len(lastLine))
	}

	ticks := regexp.MustCompile(`^tick (\d+)$`)
	tickOf := func(l string) int {
		m := ticks.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("%q is not a tick line", l)
		}
		i, _ := strconv.Atoi(m[1])
		return i
	}
	waitFor(t, 10*time.Second, "a few ticks", func() (bool, error) {
		_, body := get("tailLines=1")
		return strings.HasPrefix(body, "tick ") && tickOf(strings.TrimSpace(body)) >= 10, nil // 2 s of ticks
	})
	code, body := get("tailLines=3")
	lines := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
	if code != 200 || len(lines) != 3 || tickOf(lines[1]) != tickOf(lines[0])+1 || tickOf(lines[2]) != tickOf(lines[1])+1 {
		t.Errorf("tailLines=3: %d %q", code, body)
	}
	if code, body := get("limitBytes=8"); code != 200 || body != "second-r" {
		t.Errorf("limitBytes=8: %d %q", code, body)
	}
	code, body = get("timestamps=true&tailLines=1")
	stamp, rest, _ := strings.Cut(strings.TrimSuffix(body, "\n"), " ")
	ts, err := time.Parse(time.RFC3339Nano, stamp)
	if code != 200 || err != nil || time.Since(ts) > time.Minute || time.Since(ts) < -time.Minute || !ticks.MatchString(rest) {
		t.Errorf("timestamps: %d %q (%v)", code, body, err)
	}
	// The second run began seconds ago: sinceSeconds=1 has ticks only.
	code, body = get("sinceSeconds=1")
	if code != 200 || !strings.HasPrefix(body, "tick ") || strings.Contains(body, "second-run") {
		t.Errorf("sinceSeconds=1: %d %q", code, body)
	}
	if code, body := get("sinceTime=" + url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339))); code != 200 || body != "" {
		t.Errorf("sinceTime in an hour: %d %q", code, body)
	}
	if code, _ := get("tailLines=-1"); code != http.StatusUnprocessableEntity {
		t.Errorf("tailLines=-1: %d", code)
	}

	// Follow: consecutive ticks as they come, and the end of the response
	// once the pod is removed and its container stops.
	fresp, err := http.Get(srv.URL + "/containerLogs/default/" + name + "/main?follow=true&tailLines=1")
	must(t, err)
	defer fresp.Body.Close()
	lineCh := make(chan string)
	go func() {
		defer close(lineCh)
		br := bufio.NewReader(fresp.Body)
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				return
			}
			lineCh <- strings.TrimSuffix(l, "\n")
		}
	}()
	var followed []int
	for len(followed) < 5 {
		select {
		case l := <-lineCh:
			followed = append(followed, tickOf(l))
		case <-time.After(10 * time.Second):
			t.Fatalf("follow: no line within 10s after %v", followed)
		}
	}
	for i := 1; i < len(followed); i++ {
		if followed[i] != followed[i-1]+1 {
			t.Errorf("followed ticks are not consecutive: %v", followed)
		}
	}
	n.removeManifest("talker.yaml")
	deadline := time.After(30 * time.Second)
	for ended := false; !ended; {
		select {
		case l, ok := <-lineCh:
			if !ok {
				ended = true
			} else if l != "" {
				tickOf(l)
			}
		case <-deadline:
			t.Fatal("follow did not end after the container stopped")
		}
	}
}

// Container log rotation with a small containerLogMaxSize: the log of a
// chatty container is rotated (renamed, reopened by containerd, older
// files gzipped), the container keeps logging into the new file, no
// more than containerLogMaxFiles files are kept, and a follower reading
// through the rotations misses no line.
func TestContainerLogRotation(t *testing.T) {
	n := newPrivateNode(t)
	appendNodeConfig(t, n, "containerLogMaxSize: 16Ki\ncontainerLogMaxFiles: 3\ncontainerLogMonitorInterval: 3s\n")
	pad := strings.Repeat("x", 100)
	n.writeManifest("chatty.yaml", staticPod("chatty",
		`trap 'exit 0' TERM; i=0; while true; do echo "n=$i `+pad+`"; i=$((i+1)); sleep 0.01; done`, ""))
	n.start()
	p := n.waitRunning("chatty-"+nodeName, 30*time.Second)
	dir := filepath.Join(podLogsRoot, "default_"+p.Name+"_"+string(p.UID), "main")
	logPath := filepath.Join(dir, "0.log")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &lockedBuffer{}
	done := make(chan error, 1)
	running := func(context.Context) bool { return true }
	go func() { done <- logs.ReadLogs(ctx, logPath, logs.Options{Follow: true}, running, out, out) }()
	// Rotations count from the follower's first line on: under load the
	// file may have been rotated before the follower opened it.
	waitFor(t, 30*time.Second, "the follower's first line", func() (bool, error) { return out.String() != "", nil })
	old := map[string]bool{}
	entries, err := os.ReadDir(dir)
	must(t, err)
	for _, e := range entries {
		old[strings.TrimSuffix(e.Name(), ".gz")] = true
	}
	rotated := map[string]bool{}
	var gz bool
	waitFor(t, 90*time.Second, "three rotations, one compressed", func() (bool, error) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return false, err
		}
		have := map[string]bool{}
		for _, e := range entries {
			have[e.Name()] = true
		}
		kept := 0
		for _, e := range entries {
			name := e.Name()
			// A compression under way: its temporary file, or the
			// original about to go once its .gz is in place.
			if strings.HasSuffix(name, ".tmp") || have[name+".gz"] {
				continue
			}
			kept++
			if base := strings.TrimSuffix(name, ".gz"); name != "0.log" && !old[base] {
				rotated[base] = true
				gz = gz || strings.HasSuffix(name, ".gz")
			}
		}
		if kept > 3 {
			return false, fmt.Errorf("%d log files kept, more than containerLogMaxFiles 3: %v", kept, entries)
		}
		return len(rotated) >= 3 && gz, nil
	})
	// The container writes on, into the reopened file.
	before, err := os.Stat(logPath)
	must(t, err)
	waitFor(t, 10*time.Second, "the new log growing", func() (bool, error) {
		now, err := os.Stat(logPath)
		return err == nil && (now.Size() > before.Size() || !os.SameFile(now, before)), nil
	})
	if got, _ := n.pod(p.Name); got == nil || got.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("the container restarted during rotation: %+v", got)
	}

	cancel()
	<-done
	var prev, count int
	for i, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 || !strings.HasPrefix(f[0], "n=") || f[1] != pad {
			t.Fatalf("followed line %d is %q", i, l)
		}
		v, _ := strconv.Atoi(strings.TrimPrefix(f[0], "n="))
		if i > 0 && v != prev+1 {
			t.Fatalf("following across rotations lost lines: %d after %d", v, prev)
		}
		prev, count = v, count+1
	}
	// The follower began in the file of the first of those rotations,
	// and read two more files of at least 16 KiB whole.
	if count*len("n=0 "+pad) < 2*16<<10 {
		t.Errorf("followed only %d lines across three rotations of 16 KiB", count)
	}
}

// lockedBuffer is a bytes.Buffer written by one goroutine, read by another.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
