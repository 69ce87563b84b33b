package main

import (
	"fmt"
	"io"
	"path"
	"regexp"
	"sort"
	"strings"
	"time"
)

// maxBuffered bounds the output kept for one running test: a failure
// shows its last lines.
const maxBuffered = 3000

// result is one finished top-level test.
type result struct {
	pkg, name, action string
	elapsed           float64
}

// report follows test2json's events; only top-level tests are reported,
// each with its subtests' output.
type report struct {
	w        io.Writer
	times    io.Writer
	failures io.Writer // each failed test's own messages, if set
	label    string
	output   map[string][]string  // by key(pkg, top-level test)
	running  map[string]time.Time // when each running test started
	finished []result
}

func newReport(w io.Writer) *report {
	return &report{w: w, output: map[string][]string{}, running: map[string]time.Time{}}
}

func key(pkg, test string) string { return pkg + " " + test }

// line handles one line of go test -json's output; lines that are not
// events (a build's output) are passed through.
func (r *report) line(line string) {
	e, ok := parse(line)
	if !ok {
		fmt.Fprintln(r.w, line)
		return
	}
	if e.Test == "" {
		if e.Action == "output" && e.Output != "PASS\n" {
			fmt.Fprint(r.w, e.Output)
		}
		return
	}
	top, _, sub := strings.Cut(e.Test, "/")
	k := key(e.Package, top)
	switch e.Action {
	case "run":
		if !sub {
			r.running[k] = time.Now()
		}
	case "output":
		if noise(e.Output) {
			return
		}
		buf := append(r.output[k], e.Output)
		if len(buf) > maxBuffered {
			buf = append(buf[:0], buf[len(buf)-maxBuffered:]...)
		}
		r.output[k] = buf
	case "pass", "fail", "skip":
		if sub {
			return
		}
		r.finish(result{pkg: e.Package, name: top, action: e.Action, elapsed: e.Elapsed}, r.output[k])
		delete(r.output, k)
		delete(r.running, k)
	}
}

// noise is test2json's bookkeeping of parallel tests.
func noise(out string) bool {
	for _, p := range []string{"=== PAUSE", "=== CONT", "=== NAME"} {
		if strings.HasPrefix(out, p) {
			return true
		}
	}
	return false
}

func (r *report) finish(res result, out []string) {
	r.finished = append(r.finished, res)
	if r.times != nil {
		fmt.Fprintf(r.times, "%s %.1f %s %s\n", res.name, res.elapsed, res.action, r.label)
	}
	switch res.action {
	case "pass":
		fmt.Fprintf(r.w, "--- PASS: %s (%s) [%s]\n", res.name, formatSeconds(res.elapsed), path.Base(res.pkg))
	default:
		// The test's own output ends with its --- FAIL or --- SKIP line.
		fmt.Fprint(r.w, strings.Join(out, ""))
	}
	if res.action == "fail" && r.failures != nil {
		writeMessages(r.failures, res.name, r.label, out)
	}
}

// testMessage is the start of a line t.Error or t.Fatal wrote.
var testMessage = regexp.MustCompile(`^\s+\S+_test\.go:\d+: `)

// Bounds on a failed test's messages in the failures file, so that the
// end of a long run's output still shows why each test failed.
const (
	maxMessages    = 12
	maxMessageRune = 400
)

// writeMessages writes the lines of out that a test's t.Error or t.Fatal
// wrote, each cut short, under a heading naming the test.
func writeMessages(w io.Writer, name, label string, out []string) {
	fmt.Fprintf(w, "--- FAIL: %s [%s]\n", name, label)
	n := 0
	for _, l := range out {
		if !testMessage.MatchString(l) {
			continue
		}
		if n++; n > maxMessages {
			fmt.Fprintln(w, "    (more messages in the test's output above)")
			return
		}
		l = strings.TrimRight(l, "\n")
		if r := []rune(l); len(r) > maxMessageRune {
			l = string(r[:maxMessageRune]) + " …"
		}
		fmt.Fprintln(w, l)
	}
	if n == 0 {
		fmt.Fprintln(w, "    (no t.Error or t.Fatal message: a panic or a timeout; see the output above)")
	}
}

// printStopped names the tests a stop cut short, with their last output.
func (r *report) printStopped(why string) {
	names := make([]string, 0, len(r.running))
	for k := range r.running {
		names = append(names, k)
	}
	sort.Strings(names)
	fmt.Fprintf(r.w, "\ntestreport: STOPPED: %s; %d tests were still running:\n", why, len(names))
	for _, k := range names {
		fmt.Fprintf(r.w, "  %s (for %s)\n", k, time.Since(r.running[k]).Round(time.Second))
	}
	for _, k := range names {
		out := r.output[k]
		if len(out) > 30 {
			out = out[len(out)-30:]
		}
		fmt.Fprintf(r.w, "--- last output of %s:\n%s", k, strings.Join(out, ""))
	}
}

// printSlowest lists the n slowest finished tests, slowest first.
func (r *report) printSlowest(n int) {
	if n <= 0 || len(r.finished) == 0 {
		return
	}
	s := append([]result(nil), r.finished...)
	sort.SliceStable(s, func(i, j int) bool { return s[i].elapsed > s[j].elapsed })
	if len(s) > n {
		s = s[:n]
	}
	fmt.Fprintf(r.w, "\nslowest %d of %d tests:\n", len(s), len(r.finished))
	for _, res := range s {
		fmt.Fprintf(r.w, "  %8s  %-4s  %s [%s]\n", formatSeconds(res.elapsed), strings.ToUpper(res.action), res.name, path.Base(res.pkg))
	}
}
