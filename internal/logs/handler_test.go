package logs

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeSource has one pod, ns/web, with a container "app" whose current
// log is cur and whose previous instance's log is prev.
type fakeSource struct {
	cur, prev string
	running   atomic.Bool
	asked     []string
}

func (f *fakeSource) ContainerLog(_ context.Context, ns, pod, ctr string, previous bool) (Log, error) {
	f.asked = append(f.asked, ns+"/"+pod+"/"+ctr)
	if ns != "ns" || pod != "web" {
		return Log{}, NotFound("pod %q does not exist", pod)
	}
	if ctr == "waiting" {
		return Log{}, errors.New(`container "waiting" in pod "web" is waiting to start: ContainerCreating`)
	}
	if ctr != "app" {
		return Log{}, NotFound("container %q not found in pod %q", ctr, pod)
	}
	if previous {
		if f.prev == "" {
			return Log{}, errors.New(`previous terminated container "app" in pod "web" not found`)
		}
		return Log{Path: f.prev}, nil
	}
	return Log{Path: f.cur, Running: func(context.Context) bool { return f.running.Load() }}, nil
}

func TestHandler(t *testing.T) {
	src := &fakeSource{
		cur:  writeLog(t, line(1, "stdout", "F", "out-1")+line(2, "stderr", "F", "err-1")+line(3, "stdout", "F", "out-2")),
		prev: writeLog(t, line(0, "stdout", "F", "before the restart")),
	}
	h := Handler(src)
	for _, tc := range []struct {
		name   string
		method string
		target string
		code   int
		body   string // the whole body for 200, a substring otherwise
	}{
		{name: "all", target: "/containerLogs/ns/web/app", code: 200, body: "out-1\nerr-1\nout-2\n"},
		{name: "mounted under StripPrefix", target: "/ns/web/app", code: 200, body: "out-1\nerr-1\nout-2\n"},
		{name: "tailLines", target: "/containerLogs/ns/web/app?tailLines=2", code: 200, body: "err-1\nout-2\n"},
		{name: "legacy tail", target: "/containerLogs/ns/web/app?tail=1", code: 200, body: "out-2\n"},
		{name: "legacy tail=all", target: "/containerLogs/ns/web/app?tail=all", code: 200, body: "out-1\nerr-1\nout-2\n"},
		{name: "limitBytes", target: "/containerLogs/ns/web/app?limitBytes=8", code: 200, body: "out-1\ner"},
		{name: "stdout", target: "/containerLogs/ns/web/app?stream=Stdout", code: 200, body: "out-1\nout-2\n"},
		{name: "stderr", target: "/containerLogs/ns/web/app?stream=Stderr", code: 200, body: "err-1\n"},
		{name: "stream All with tail", target: "/containerLogs/ns/web/app?stream=All&tailLines=1", code: 200, body: "out-2\n"},
		{name: "sinceTime", target: "/containerLogs/ns/web/app?sinceTime=" + t0.Add(2*time.Second).Format(time.RFC3339), code: 200, body: "err-1\nout-2\n"},
		{name: "sinceSeconds", target: "/containerLogs/ns/web/app?sinceSeconds=3600", code: 200, body: ""},
		{name: "timestamps", target: "/containerLogs/ns/web/app?timestamps=true&tailLines=1", code: 200,
			body: t0.Add(3*time.Second).Format(timeFormatOut) + " out-2\n"},
		{name: "previous", target: "/containerLogs/ns/web/app?previous=true", code: 200, body: "before the restart\n"},
		{name: "previous=false", target: "/containerLogs/ns/web/app?previous=false&tailLines=1", code: 200, body: "out-2\n"},

		{name: "unknown pod", target: "/containerLogs/ns/nope/app", code: 404, body: `pod "nope" does not exist`},
		{name: "unknown container", target: "/containerLogs/ns/web/nope", code: 404, body: `container "nope" not found`},
		{name: "too few segments", target: "/containerLogs/ns/web", code: 404},
		{name: "too many segments", target: "/containerLogs/ns/web/app/x", code: 404},
		{name: "traversal", target: "/containerLogs/ns/../app", code: 400, body: "invalid pod name"},
		{name: "escaped slash", target: "/containerLogs/ns/web%2F..%2Fother/app", code: 404},
		{name: "dot namespace", target: "/containerLogs/./web/app", code: 400, body: "invalid namespace"},
		{name: "upper-case container", target: "/containerLogs/ns/web/App", code: 400, body: "invalid container name"},
		{name: "waiting container", target: "/containerLogs/ns/web/waiting", code: 400, body: "waiting to start"},

		{name: "tailLines not a number", target: "/containerLogs/ns/web/app?tailLines=ten", code: 400, body: "tailLines"},
		{name: "limitBytes empty", target: "/containerLogs/ns/web/app?limitBytes=", code: 400, body: "limitBytes"},
		{name: "sinceTime not a time", target: "/containerLogs/ns/web/app?sinceTime=yesterday", code: 400, body: "sinceTime"},
		{name: "negative tailLines", target: "/containerLogs/ns/web/app?tailLines=-1", code: 422, body: "tailLines"},
		{name: "zero limitBytes", target: "/containerLogs/ns/web/app?limitBytes=0", code: 422, body: "limitBytes"},
		{name: "zero sinceSeconds", target: "/containerLogs/ns/web/app?sinceSeconds=0", code: 422, body: "sinceSeconds"},
		{name: "both since", target: "/containerLogs/ns/web/app?sinceSeconds=5&sinceTime=2025-01-01T00:00:00Z", code: 422, body: "at most one"},
		{name: "unknown stream", target: "/containerLogs/ns/web/app?stream=Stdin", code: 422, body: "stream"},
		{name: "stream with tailLines", target: "/containerLogs/ns/web/app?stream=Stdout&tailLines=1", code: 422, body: "mutually exclusive"},
		{name: "POST", method: http.MethodPost, target: "/containerLogs/ns/web/app", code: 405},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = http.MethodGet
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(method, tc.target, nil))
			if rec.Code != tc.code {
				t.Fatalf("%s: %d %q, want %d", tc.target, rec.Code, rec.Body.String(), tc.code)
			}
			switch {
			case tc.code == 200 && rec.Body.String() != tc.body:
				t.Errorf("%s: body %q, want %q", tc.target, rec.Body.String(), tc.body)
			case tc.code != 200 && !strings.Contains(rec.Body.String(), tc.body):
				t.Errorf("%s: body %q, want it to mention %q", tc.target, rec.Body.String(), tc.body)
			}
		})
	}
	for _, a := range src.asked {
		if strings.Contains(a, "..") {
			t.Errorf("the source was asked for %q", a)
		}
	}
}

// Following over HTTP: lines come as they are written (the response is
// flushed, not buffered to the end), and the response ends once the
// container has stopped.
func TestHandlerFollow(t *testing.T) {
	src := &fakeSource{cur: writeLog(t, line(1, "stdout", "F", "first"))}
	src.running.Store(true)
	srv := httptest.NewServer(Handler(src))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/containerLogs/ns/web/app?follow=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	lines := make(chan string)
	go func() {
		br := bufio.NewReader(resp.Body)
		for {
			l, err := br.ReadString('\n')
			if l != "" {
				lines <- l
			}
			if err != nil {
				close(lines)
				return
			}
		}
	}()
	next := func() string {
		select {
		case l := <-lines:
			return l
		case <-time.After(10 * time.Second):
			t.Fatal("no line within 10s")
			return ""
		}
	}
	if l := next(); l != "first\n" {
		t.Fatalf("first line %q", l)
	}
	appendTo(t, src.cur, line(2, "stderr", "F", "second"))
	if l := next(); l != "second\n" {
		t.Fatalf("second line %q", l)
	}
	src.running.Store(false)
	select {
	case l, ok := <-lines:
		if ok {
			t.Fatalf("unexpected line %q after the container stopped", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the response did not end after the container stopped")
	}
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Errorf("body: %v", err)
	}
}
