package logs

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// FuzzParseRecord parses arbitrary CRI log lines. A line it accepts must
// come back the same from its parts (timestamp, stream, tag, content),
// with the content the line's own tail.
func FuzzParseRecord(f *testing.F) {
	for _, s := range []string{
		"2026-11-25T10:00:00.123456789Z stdout F hello",
		"2026-11-25T10:00:00Z stderr P part",
		"2026-11-25T10:00:00+02:00 stdout F:x:y with spaces  ",
		"2026-11-25T10:00:00Z stdout F",
		"2026-11-25T10:00:00Z stdout F ",
		"garbage", "2026-11-25T10:00:00Z", "2026-11-25T10:00:00Z stdin F x", "2026-11-25T10:00:00Z stdout X x",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := parseRecord(line)
		if err != nil {
			return
		}
		if !bytes.HasSuffix(line, r.content) {
			t.Fatalf("content %q is not the tail of %q", r.content, line)
		}
		ts, rest, _ := bytes.Cut(line, []byte{' '})
		again, err := parseRecord(append(append(ts, ' '), rest...))
		if err != nil || !again.ts.Equal(r.ts) || again.stream != r.stream || again.partial != r.partial || !bytes.Equal(again.content, r.content) {
			t.Fatalf("reparsing %q: %+v, %v; want %+v", line, again, err, r)
		}
		stream := map[int]string{streamStdout: "stdout", streamStderr: "stderr"}[r.stream]
		tag := map[bool]string{true: "P", false: "F"}[r.partial]
		built := r.ts.Format(time.RFC3339Nano) + " " + stream + " " + tag + " " + string(r.content)
		if back, err := parseRecord([]byte(built)); err != nil || !back.ts.Equal(r.ts) || !bytes.Equal(back.content, r.content) {
			t.Fatalf("record %+v written as %q reads back %+v, %v", r, built, back, err)
		}
	})
}

// FuzzReadLogs reads arbitrary log files. Whatever the file: the last n
// lines are the tail of the whole output, asking for more lines than
// there are gives the whole output, and limitBytes bounds the output.
func FuzzReadLogs(f *testing.F) {
	f.Add([]byte("2026-11-25T10:00:00Z stdout F a\n2026-11-25T10:00:01Z stderr P b\n2026-11-25T10:00:02Z stderr F c\n"), uint8(1), uint8(3))
	f.Add([]byte("2026-11-25T10:00:00Z stdout P a\n2026-11-25T10:00:01Z stdout P b\nbroken\n2026-11-25T10:00:02Z stdout F c"), uint8(2), uint8(1))
	f.Add([]byte("\n\n2026-11-25T10:00:00Z stdout F \n"), uint8(0), uint8(0))
	f.Fuzz(func(t *testing.T, content []byte, tail, limit uint8) {
		path := filepath.Join(t.TempDir(), "0.log")
		if err := os.WriteFile(path, content, 0o644); err != nil {
			t.Fatal(err)
		}
		read := func(o Options) string {
			var out bytes.Buffer
			if err := ReadLogs(context.Background(), path, o, nil, &out, &out); err != nil {
				t.Fatalf("ReadLogs(%+v): %v", o, err)
			}
			return out.String()
		}
		whole := read(Options{})
		n, lim := int64(tail), int64(limit)+1
		if got := read(Options{TailLines: &n}); !strings.HasSuffix(whole, got) || strings.Count(got, "\n") > int(n) {
			t.Errorf("the last %d lines %q are not the tail of %q", n, got, whole)
		}
		all := int64(len(content) + 1)
		if got := read(Options{TailLines: &all}); got != whole {
			t.Errorf("all %d lines read %q, the whole log %q", all, got, whole)
		}
		if got := read(Options{LimitBytes: &lim}); int64(len(got)) > lim || !strings.HasPrefix(whole, got) {
			t.Errorf("limitBytes %d read %q of %q", lim, got, whole)
		}
	})
}

// FuzzContainerLogsRequest parses arbitrary /containerLogs paths and
// queries. A path it accepts names three valid, non-empty names with no
// '/' or '..' (nothing can climb out of the pod log directory), and
// rebuilds to the same names; a query it accepts validates, and its
// options encoded again parse to the same options. Errors are 400, 404
// or 422, as upstream's.
func FuzzContainerLogsRequest(f *testing.F) {
	f.Add("/containerLogs/ns/pod/c", "follow=true&tailLines=10&timestamps=1")
	f.Add("/containerLogs/ns/../c", "tail=all&limitBytes=5")
	f.Add("ns/pod.a/c/", "sinceSeconds=3&sinceTime=2026-11-25T10:00:00Z")
	f.Add("/containerLogs//pod/c", "stream=Stderr&tailLines=1")
	f.Add("/containerLogs/ns/pod/c", "previous=0&sinceTime=bad&stream=")
	f.Fuzz(func(t *testing.T, p, rawQuery string) {
		ns, pod, ctr, status, err := parsePath(p)
		if err != nil {
			if status != http.StatusBadRequest && status != http.StatusNotFound {
				t.Errorf("path %q: status %d", p, status)
			}
		} else {
			for _, name := range []string{ns, pod, ctr} {
				if name == "" || strings.Contains(name, "/") || strings.Contains(name, "..") {
					t.Errorf("path %q gave the name %q", p, name)
				}
			}
			if a, b, c, _, err := parsePath(Prefix + ns + "/" + pod + "/" + ctr); err != nil || a != ns || b != pod || c != ctr {
				t.Errorf("path %q: names %q %q %q do not rebuild: %v", p, ns, pod, ctr, err)
			}
		}
		q, err := url.ParseQuery(rawQuery)
		if err != nil {
			return
		}
		o, status, err := parseQuery(q)
		if err != nil {
			if status != http.StatusBadRequest && status != http.StatusUnprocessableEntity {
				t.Errorf("query %q: status %d", rawQuery, status)
			}
			return
		}
		if err := validate(o); err != nil {
			t.Errorf("query %q accepted options that do not validate: %v", rawQuery, err)
		}
		again, _, err := parseQuery(encodeOptions(o))
		if err != nil || !sameOptions(again, o) {
			t.Errorf("query %q: %+v encodes to %v, which parses to %+v, %v", rawQuery, o, encodeOptions(o), again, err)
		}
	})
}

// sameOptions compares options, times by instant: a zero time comes back
// in UTC rather than with no location.
func sameOptions(a, b *v1.PodLogOptions) bool {
	if (a.SinceTime == nil) != (b.SinceTime == nil) || (a.SinceTime != nil && !a.SinceTime.Equal(b.SinceTime)) {
		return false
	}
	x, y := *a, *b
	x.SinceTime, y.SinceTime = nil, nil
	return reflect.DeepEqual(x, y)
}

// encodeOptions writes options as a query, as the apiserver sends them.
func encodeOptions(o *v1.PodLogOptions) url.Values {
	q := url.Values{}
	for name, b := range map[string]bool{"follow": o.Follow, "previous": o.Previous, "timestamps": o.Timestamps,
		"insecureSkipTLSVerifyBackend": o.InsecureSkipTLSVerifyBackend} {
		if b {
			q.Set(name, "true")
		}
	}
	for name, n := range map[string]*int64{"tailLines": o.TailLines, "limitBytes": o.LimitBytes, "sinceSeconds": o.SinceSeconds} {
		if n != nil {
			q.Set(name, strconv.FormatInt(*n, 10))
		}
	}
	if o.SinceTime != nil {
		q.Set("sinceTime", o.SinceTime.UTC().Format(time.RFC3339))
	}
	if o.Stream != nil {
		q.Set("stream", *o.Stream)
	}
	return q
}
