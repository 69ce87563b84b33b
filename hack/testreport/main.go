// Command testreport runs `go test -json` and prints what a person reads:
// one line per finished top-level test, the whole output of each test that
// failed, and at the end the slowest tests. Past a deadline it stops the
// run and says which tests were still running and which were slowest, so
// a run is never killed from outside without a word.
//
// Usage: testreport [-deadline UNIX] [-slowest N] [-times FILE] [-failures FILE] [-label L] -- go test -json ...
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

func main() {
	deadline := flag.Int64("deadline", 0, "stop the run at this Unix time (0: no deadline)")
	slowest := flag.Int("slowest", 15, "how many of the slowest tests to list at the end")
	times := flag.String("times", "", "append each finished top-level test as `name seconds result label` to this file")
	failures := flag.String("failures", "", "append each failed top-level test's t.Error and t.Fatal messages to this file")
	label := flag.String("label", "", "the label of this run in the times and failures files (the runtime, say)")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: testreport [-deadline UNIX] [-slowest N] [-times FILE] [-failures FILE] [-label L] -- go test -json ...")
		os.Exit(2)
	}
	os.Exit(run(flag.Args(), *deadline, *slowest, *times, *failures, *label))
}

func run(argv []string, deadline int64, slowest int, times, failures, label string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, time.Unix(deadline, 0))
		defer cancel()
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	// Its own process group, so a stop reaches the test binaries too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		return 2
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		return 2
	}
	r := newReport(os.Stdout)
	r.label = label
	for _, o := range []struct {
		path string
		w    *io.Writer
	}{{times, &r.times}, {failures, &r.failures}} {
		if o.path == "" {
			continue
		}
		f, err := os.OpenFile(o.path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testreport:", err)
			return 2
		}
		defer f.Close()
		*o.w = f
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				err := cmd.Wait()
				r.printSlowest(slowest)
				return exitCode(err)
			}
			r.line(line)
		case <-ctx.Done():
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
			why := "interrupted"
			if ctx.Err() == context.DeadlineExceeded {
				why = "the time cap was reached"
			}
			r.printStopped(why)
			r.printSlowest(slowest)
			return 3
		}
	}
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() > 0 {
		return ee.ExitCode()
	}
	return 1
}

// event is one line of test2json's output.
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

func parse(line string) (event, bool) {
	var e event
	if len(line) == 0 || line[0] != '{' || json.Unmarshal([]byte(line), &e) != nil || e.Action == "" {
		return e, false
	}
	return e, true
}

func formatSeconds(s float64) string {
	return strconv.FormatFloat(s, 'f', 1, 64) + "s"
}
