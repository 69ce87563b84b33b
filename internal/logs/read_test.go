package logs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)

// line renders one CRI record, sec seconds after t0.
func line(sec int, stream, tag, content string) string {
	return fmt.Sprintf("%s %s %s %s\n", t0.Add(time.Duration(sec)*time.Second).Format(time.RFC3339Nano), stream, tag, content)
}

func writeLog(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "0.log")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func ptr[T any](v T) *T { return &v }

func TestParseRecord(t *testing.T) {
	for _, tc := range []struct {
		in      string
		stream  int
		partial bool
		content string
		bad     bool
	}{
		{in: "2025-03-01T10:00:00.123456789Z stdout F hello world", stream: streamStdout, content: "hello world"},
		{in: "2025-03-01T10:00:00Z stderr P part", stream: streamStderr, partial: true, content: "part"},
		{in: "2025-03-01T11:00:00.5+01:00 stdout F ", stream: streamStdout, content: ""},
		{in: "2025-03-01T10:00:00Z stdout F", stream: streamStdout, content: ""},
		{in: "2025-03-01T10:00:00Z stdout F:x:y two  spaces ", stream: streamStdout, content: "two  spaces "},
		{in: "2025-03-01T10:00:00Z stdin F x", bad: true},
		{in: "2025-03-01T10:00:00Z stdout Q x", bad: true},
		{in: "yesterday stdout F x", bad: true},
		{in: "", bad: true},
		{in: `{"log":"docker json","stream":"stdout"}`, bad: true},
	} {
		r, err := parseRecord([]byte(tc.in))
		if tc.bad {
			if err == nil {
				t.Errorf("%q: parsed, want an error", tc.in)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if r.stream != tc.stream || r.partial != tc.partial || string(r.content) != tc.content {
			t.Errorf("%q: got stream %d partial %v content %q", tc.in, r.stream, r.partial, r.content)
		}
		if !r.ts.Equal(t0) && !strings.Contains(tc.in, "10:00:00.") && !strings.Contains(tc.in, "11:00") {
			t.Errorf("%q: timestamp %v", tc.in, r.ts)
		}
	}
}

// A log with partial lines in both streams, interleaved.
var mixed = line(1, "stdout", "F", "one") +
	line(2, "stderr", "F", "err-a") +
	line(3, "stdout", "P", "tw") + // stdout's second line in three records,
	line(4, "stderr", "P", "err-") + // interleaved with a partial stderr line
	line(5, "stdout", "P", "o-") +
	line(6, "stderr", "F", "b") +
	line(7, "stdout", "F", "two") +
	line(8, "stdout", "F", "three") +
	line(9, "stderr", "F", "err-c") +
	line(10, "stdout", "F", "")

func TestReadLogs(t *testing.T) {
	ts := func(sec int) string { return t0.Add(time.Duration(sec)*time.Second).Format(timeFormatOut) + " " }
	for _, tc := range []struct {
		name           string
		log            string
		opts           Options
		stdout, stderr bool
		want           string
	}{
		{name: "everything, partial lines joined", log: mixed, stdout: true, stderr: true,
			want: "one\nerr-a\nerr-b\ntwo-two\nthree\nerr-c\n\n"},
		{name: "stdout only", log: mixed, stdout: true, want: "one\ntwo-two\nthree\n\n"},
		{name: "stderr only", log: mixed, stderr: true, want: "err-a\nerr-b\nerr-c\n"},
		{name: "tail 0", log: mixed, stdout: true, stderr: true, opts: Options{TailLines: ptr[int64](0)}, want: ""},
		{name: "tail 1", log: mixed, stdout: true, stderr: true, opts: Options{TailLines: ptr[int64](1)}, want: "\n"},
		{name: "tail 3", log: mixed, stdout: true, stderr: true, opts: Options{TailLines: ptr[int64](3)}, want: "three\nerr-c\n\n"},
		// Lines count (and are written) where they end: a partial line
		// counts once and is written whole.
		{name: "tail across partial lines", log: mixed, stdout: true, stderr: true, opts: Options{TailLines: ptr[int64](5)},
			want: "err-b\ntwo-two\nthree\nerr-c\n\n"},
		// err-b's line ended before two-two's did, though it began after:
		// it is the 5th from the end, and none of it is written.
		{name: "tail 4: interleaved lines are cut by stream", log: mixed, stdout: true, stderr: true, opts: Options{TailLines: ptr[int64](4)},
			want: "two-two\nthree\nerr-c\n\n"},
		{name: "tail more than there is", log: mixed, stdout: true, stderr: true, opts: Options{TailLines: ptr[int64](100)},
			want: "one\nerr-a\nerr-b\ntwo-two\nthree\nerr-c\n\n"},
		{name: "tail of one stream", log: mixed, stderr: true, opts: Options{TailLines: ptr[int64](2)}, want: "err-b\nerr-c\n"},
		{name: "limitBytes cuts a line", log: mixed, stdout: true, stderr: true, opts: Options{LimitBytes: ptr[int64](14)}, want: "one\nerr-a\nerr-"},
		{name: "limitBytes exactly a line", log: mixed, stdout: true, stderr: true, opts: Options{LimitBytes: ptr[int64](4)}, want: "one\n"},
		{name: "limitBytes with tail", log: mixed, stdout: true, stderr: true, opts: Options{TailLines: ptr[int64](2), LimitBytes: ptr[int64](3)}, want: "err"},
		// since is decided where a line begins: two-two began at 3 s.
		{name: "since", log: mixed, stdout: true, stderr: true, opts: Options{Since: t0.Add(4 * time.Second)},
			want: "err-b\nthree\nerr-c\n\n"},
		{name: "since in the future", log: mixed, stdout: true, stderr: true, opts: Options{Since: t0.Add(time.Hour)}, want: ""},
		{name: "timestamps once per line", log: mixed, stdout: true, opts: Options{Timestamps: true},
			want: ts(1) + "one\n" + ts(3) + "two-two\n" + ts(8) + "three\n" + ts(10) + "\n"},
		{name: "timestamps, tail and since", log: mixed, stdout: true, stderr: true, opts: Options{Timestamps: true, TailLines: ptr[int64](3), Since: t0.Add(9 * time.Second)},
			want: ts(9) + "err-c\n" + ts(10) + "\n"},
		{name: "garbage lines skipped", log: "not a record\n" + line(1, "stdout", "F", "ok") + "\n", stdout: true, want: "ok\n"},
		{name: "an unfinished last record is written", log: line(1, "stdout", "F", "a") + strings.TrimSuffix(line(2, "stdout", "F", "b"), "\n"), stdout: true,
			want: "a\nb\n"},
		{name: "unfinished partial line at the end", log: line(1, "stdout", "F", "a") + line(2, "stdout", "P", "b"), stdout: true, opts: Options{TailLines: ptr[int64](1)},
			want: "b"},
		{name: "empty log", log: "", stdout: true, stderr: true, opts: Options{TailLines: ptr[int64](3)}, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			var stdout, stderr *bytes.Buffer
			if tc.stdout {
				stdout = &out
			}
			if tc.stderr {
				stderr = &out
			}
			err := ReadLogs(context.Background(), writeLog(t, tc.log), tc.opts, nil, writer(stdout), writer(stderr))
			if err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.want {
				t.Errorf("got\n%q\nwant\n%q", out.String(), tc.want)
			}
		})
	}
}

func writer(b *bytes.Buffer) interface{ Write([]byte) (int, error) } {
	if b == nil {
		return nil
	}
	return b
}

// Tail scans backwards in blocks: lines spanning block boundaries and a
// long log still tail right.
func TestTailLargeLog(t *testing.T) {
	var b strings.Builder
	long := strings.Repeat("x", blockSize/3)
	for i := range 400 {
		b.WriteString(line(i, "stdout", "F", fmt.Sprintf("%d %s", i, long[:i*37%len(long)])))
	}
	p := writeLog(t, b.String())
	var out bytes.Buffer
	if err := ReadLogs(context.Background(), p, Options{TailLines: ptr[int64](3)}, nil, &out, &out); err != nil {
		t.Fatal(err)
	}
	var first []string
	for _, l := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		first = append(first, strings.Fields(l)[0])
	}
	if strings.Join(first, ",") != "397,398,399" {
		t.Errorf("tail 3 of 400 lines gave lines %v", first)
	}
}

func TestNewOptions(t *testing.T) {
	now := t0.Add(time.Hour)
	o := NewOptions(&v1.PodLogOptions{SinceSeconds: ptr[int64](60)}, now)
	if !o.Since.Equal(now.Add(-time.Minute)) {
		t.Errorf("sinceSeconds 60: since %v", o.Since)
	}
	o = NewOptions(&v1.PodLogOptions{SinceTime: &metav1.Time{Time: t0}, Timestamps: true, Follow: true}, now)
	if !o.Since.Equal(t0) || !o.Timestamps || !o.Follow {
		t.Errorf("sinceTime: %+v", o)
	}
}

// syncBuffer is a bytes.Buffer safe to read while ReadLogs writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func waitUntil(t *testing.T, what string, cond func() bool, out ...*syncBuffer) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			if len(out) > 0 {
				t.Fatalf("timed out waiting for %s; got %q", what, out[0].String())
			}
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func appendTo(t *testing.T, path, content string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
}

// Following reads what is appended (a record written in two pieces is
// written once whole), goes on in the new file after a rotation, and ends
// once the container stopped and the file is drained.
func TestFollowAcrossRotation(t *testing.T) {
	p := writeLog(t, line(1, "stdout", "F", "old-1")+line(2, "stdout", "F", "old-2"))
	var running atomic.Bool
	running.Store(true)
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- ReadLogs(context.Background(), p, Options{Follow: true, TailLines: ptr[int64](1)},
			func(context.Context) bool { return running.Load() }, out, out)
	}()
	waitUntil(t, "the tail", func() bool { return out.String() == "old-2\n" })

	rec := line(3, "stdout", "F", "appended")
	appendTo(t, p, rec[:10])
	appendTo(t, p, rec[10:])
	appendTo(t, p, line(4, "stderr", "P", "part-")) // held back until its line ends
	waitUntil(t, "appended lines", func() bool { return out.String() == "old-2\nappended\n" })

	// Rotate as the kubelet does: rename, then the runtime writes a bit
	// more to the renamed file before it reopens the log under the name.
	must(t, os.Rename(p, p+".20250301-100000"))
	appendTo(t, p+".20250301-100000", line(5, "stderr", "F", "ial"))
	appendTo(t, p, line(6, "stdout", "F", "new-1"))
	waitUntil(t, "lines of the new file", func() bool { return strings.HasSuffix(out.String(), "part-ial\nnew-1\n") }, out)

	appendTo(t, p, line(7, "stdout", "F", "last"))
	running.Store(false)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("follow did not end after the container stopped")
	}
	if want := "old-2\nappended\npart-ial\nnew-1\nlast\n"; out.String() != want {
		t.Errorf("followed\n%q\nwant\n%q", out.String(), want)
	}
}

// The runtime creates the new log before it switches its writer over:
// while the new file is empty, lines still land in the renamed one, and
// following must not leave it before they are read.
func TestFollowWaitsForTheNewFilesFirstLine(t *testing.T) {
	p := writeLog(t, line(1, "stdout", "F", "one"))
	out := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- ReadLogs(ctx, p, Options{Follow: true}, func(context.Context) bool { return true }, out, out)
	}()
	waitUntil(t, "the first line", func() bool { return out.String() == "one\n" })

	old := p + ".20250301-100000"
	must(t, os.Rename(p, old))
	must(t, os.WriteFile(p, nil, 0o640)) // reopened, not written to yet
	time.Sleep(300 * time.Millisecond)   // time for the follower to look
	appendTo(t, old, line(2, "stdout", "F", "two"))
	waitUntil(t, "the late line of the old file", func() bool { return out.String() == "one\ntwo\n" }, out)
	appendTo(t, p, line(3, "stdout", "F", "three"))
	waitUntil(t, "the new file's line", func() bool { return out.String() == "one\ntwo\nthree\n" }, out)
	cancel()
	<-done
}

// Following ends when ctx does, and with a byte limit once it is reached.
func TestFollowEnds(t *testing.T) {
	p := writeLog(t, line(1, "stdout", "F", "hello"))
	always := func(context.Context) bool { return true }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	out := &syncBuffer{}
	go func() { done <- ReadLogs(ctx, p, Options{Follow: true}, always, out, out) }()
	waitUntil(t, "the first line", func() bool { return out.String() == "hello\n" })
	cancel()
	select {
	case err := <-done:
		if err != context.Canceled {
			t.Errorf("follow ended with %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("follow did not end with its context")
	}

	limited := &syncBuffer{}
	go func() {
		done <- ReadLogs(context.Background(), p, Options{Follow: true, LimitBytes: ptr[int64](10)}, always, limited, limited)
	}()
	waitUntil(t, "the first line", func() bool { return limited.String() == "hello\n" })
	appendTo(t, p, line(2, "stdout", "F", "world"))
	select {
	case err := <-done:
		if err != nil || limited.String() != "hello\nworl" {
			t.Errorf("limited follow: %v, %q", err, limited.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("follow did not end at its byte limit")
	}
}

func TestTailHelper(t *testing.T) {
	var b strings.Builder
	for i := range 100 {
		b.WriteString(line(i, "stderr", "F", fmt.Sprintf("line %03d", i)))
	}
	got, err := Tail(context.Background(), writeLog(t, b.String()), 80, 2048)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, "line 020\n") || !strings.HasSuffix(got, "line 099\n") {
		t.Errorf("80 lines: %q...", got[:20])
	}
	got, _ = Tail(context.Background(), writeLog(t, b.String()), 80, 18)
	if got != "line 098\nline 099\n" {
		t.Errorf("the last 18 bytes: %q", got)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
