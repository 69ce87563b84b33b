package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const events = `{"Action":"start","Package":"p/e2e"}
{"Action":"run","Package":"p/e2e","Test":"TestFast"}
{"Action":"output","Package":"p/e2e","Test":"TestFast","Output":"=== RUN   TestFast\n"}
{"Action":"output","Package":"p/e2e","Test":"TestFast","Output":"    fast_test.go:9: chatter\n"}
{"Action":"pass","Package":"p/e2e","Test":"TestFast","Elapsed":1.5}
{"Action":"run","Package":"p/e2e","Test":"TestBroken"}
{"Action":"run","Package":"p/e2e","Test":"TestBroken/sub"}
{"Action":"output","Package":"p/e2e","Test":"TestBroken/sub","Output":"    broken_test.go:3: want 1, got 2\n"}
{"Action":"fail","Package":"p/e2e","Test":"TestBroken/sub","Elapsed":3}
{"Action":"output","Package":"p/e2e","Test":"TestBroken","Output":"--- FAIL: TestBroken (40.00s)\n"}
{"Action":"fail","Package":"p/e2e","Test":"TestBroken","Elapsed":40}
{"Action":"run","Package":"p/e2e","Test":"TestSlow"}
{"Action":"output","Package":"p/e2e","Test":"TestSlow","Output":"=== PAUSE TestSlow\n"}
{"Action":"pass","Package":"p/e2e","Test":"TestSlow","Elapsed":90.25}
{"Action":"output","Package":"p/e2e","Output":"FAIL\tp/e2e\t132s\n"}
{"Action":"fail","Package":"p/e2e","Elapsed":132}
`

func TestReportShowsFailuresAndSlowest(t *testing.T) {
	var out strings.Builder
	var times, failures strings.Builder
	r := newReport(&out)
	r.times, r.failures, r.label = &times, &failures, "rt"
	for _, l := range strings.Split(strings.TrimSpace(events), "\n") {
		r.line(l)
	}
	r.printSlowest(2)
	got := out.String()
	for _, want := range []string{
		"--- PASS: TestFast (1.5s) [e2e]",
		"broken_test.go:3: want 1, got 2",
		"--- FAIL: TestBroken (40.00s)",
		"FAIL\tp/e2e\t132s",
		"slowest 2 of 3 tests:\n     90.2s  PASS  TestSlow [e2e]\n     40.0s  FAIL  TestBroken [e2e]\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	// A passing test's chatter and the parallel bookkeeping stay out.
	for _, unwanted := range []string{"chatter", "=== PAUSE"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("report shows %q:\n%s", unwanted, got)
		}
	}
	if want := "TestFast 1.5 pass rt\nTestBroken 40.0 fail rt\nTestSlow 90.2 pass rt\n"; times.String() != want {
		t.Errorf("times file:\n%s\nwant:\n%s", times.String(), want)
	}
	// Only the failed test, with only its message.
	if want := "--- FAIL: TestBroken [rt]\n    broken_test.go:3: want 1, got 2\n"; failures.String() != want {
		t.Errorf("failures file:\n%s\nwant:\n%s", failures.String(), want)
	}
}

func TestFailureMessagesAreBounded(t *testing.T) {
	var out []string
	out = append(out, "=== RUN   TestMany\n", "containerd: a log line\n")
	for range maxMessages + 3 {
		out = append(out, "    many_test.go:7: "+strings.Repeat("x", 2*maxMessageRune)+"\n")
	}
	var w strings.Builder
	writeMessages(&w, "TestMany", "rt", out)
	lines := strings.Split(strings.TrimSpace(w.String()), "\n")
	if len(lines) != maxMessages+2 {
		t.Fatalf("%d lines, want a heading, %d messages and a note of more:\n%s", len(lines), maxMessages, w.String())
	}
	for _, l := range lines[1 : maxMessages+1] {
		if !strings.HasPrefix(l, "    many_test.go:7: x") || len([]rune(l)) > maxMessageRune+2 {
			t.Errorf("message line not cut to %d runes: %d", maxMessageRune, len([]rune(l)))
		}
	}
	w.Reset()
	writeMessages(&w, "TestPanic", "rt", []string{"panic: boom\n"})
	if !strings.Contains(w.String(), "no t.Error or t.Fatal message") {
		t.Errorf("a failure without messages is not said to be one:\n%s", w.String())
	}
}

// A run past its deadline is stopped, and the report names what was
// still running.
func TestRunStopsAtTheDeadline(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "fake-go-test")
	body := "#!/bin/sh\n" +
		`echo '{"Action":"run","Package":"p","Test":"TestDone"}'` + "\n" +
		`echo '{"Action":"pass","Package":"p","Test":"TestDone","Elapsed":2}'` + "\n" +
		`echo '{"Action":"run","Package":"p","Test":"TestHangs"}'` + "\n" +
		`echo '{"Action":"output","Package":"p","Test":"TestHangs","Output":"waiting for godot\n"}'` + "\n" +
		"exec sleep 600\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Getenv("TESTREPORT_CHILD") == "1" {
		os.Exit(run([]string{script}, time.Now().Add(2*time.Second).Unix(), 5, "", "", ""))
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunStopsAtTheDeadline$")
	cmd.Env = append(os.Environ(), "TESTREPORT_CHILD=1")
	// Were the hanging child not killed, this would wait for its 600 s.
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Fatalf("exit: %v, want status 3\n%s", err, out)
	}
	for _, want := range []string{"STOPPED: the time cap was reached", "p TestHangs (for", "waiting for godot", "TestDone [p]"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
