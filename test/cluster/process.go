package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is one control-plane binary started by Start, or found again by
// Load from the state file. Each runs in its own session (and so process
// group, pgid == pid), so that stopping it reaches anything it forked.
type process struct {
	Name      string   `json:"name"`
	PID       int      `json:"pid"`
	StartTime uint64   `json:"startTime"` // /proc/<pid>/stat field 22, guards against pid reuse
	Log       string   `json:"log"`
	Args      []string `json:"args"`

	cmd  *exec.Cmd     // nil when found by Load
	done chan struct{} // closed once cmd.Wait returned; nil when found by Load
	err  error         // cmd.Wait's result, valid after done
}

// startProcess runs bin with args, stdout and stderr going to logPath
// (truncated), stdin from /dev/null, in a new session. Unless detached the
// child gets SIGKILL when this process dies, so a test binary that panics
// or is killed leaves no control plane behind.
func startProcess(name, bin string, args []string, logPath string, detached bool) (*process, error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own copy
	fmt.Fprintf(logf, "# %s %s\n", bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if !detached {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{Name: name, PID: cmd.Process.Pid, Log: logPath, Args: append([]string{bin}, args...), cmd: cmd, done: make(chan struct{})}
	if st, err := readStat(p.PID); err == nil {
		p.StartTime = st.startTime
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process (the group leader) has exited.
func (p *process) exited() bool {
	if p.done != nil {
		select {
		case <-p.done:
			return true
		default:
			return false
		}
	}
	st, err := readStat(p.PID)
	return err != nil || st.state == 'Z' || (p.StartTime != 0 && st.startTime != p.StartTime)
}

// exitError describes how the process ended, with the tail of its log.
func (p *process) exitError() error {
	how := "exited"
	if p.done != nil {
		select {
		case <-p.done:
			if p.err != nil {
				how = p.err.Error()
			} else {
				how = "exited with status 0"
			}
		default:
		}
	}
	return fmt.Errorf("%s (pid %d) %s; last lines of %s:\n%s", p.Name, p.PID, how, p.Log, tail(p.Log, 30))
}

// groupAlive reports whether any live (non-zombie) process is left in the
// process's group. A group id is only reused by a new process with the
// same pid leading a new group, so for a process found by Load a live
// process with our pid but another start time means the group is not ours.
func (p *process) groupAlive() bool {
	if p.cmd == nil && p.StartTime != 0 {
		if st, err := readStat(p.PID); err == nil && st.state != 'Z' && st.startTime != p.StartTime {
			return false
		}
	}
	return len(groupMembers(p.PID)) > 0
}

// signalGroup sends sig to the whole process group, if anything is left in it.
func (p *process) signalGroup(sig syscall.Signal) {
	if p.groupAlive() {
		_ = syscall.Kill(-p.PID, sig)
	}
}

// stop sends SIGTERM to the group, waits up to grace for every member to
// exit, then sends SIGKILL and waits again. It reaps the leader if we
// started it.
func (p *process) stop(grace time.Duration) error {
	p.signalGroup(syscall.SIGTERM)
	if !p.waitGone(grace) {
		p.signalGroup(syscall.SIGKILL)
		if !p.waitGone(10 * time.Second) {
			return fmt.Errorf("%s (pgid %d) still has processes after SIGKILL: %v", p.Name, p.PID, groupMembers(p.PID))
		}
	}
	return nil
}

func (p *process) waitGone(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		gone := !p.groupAlive()
		if gone && p.done != nil {
			// The leader is a zombie until Wait reaps it; that is quick.
			select {
			case <-p.done:
			case <-time.After(time.Second):
			}
		}
		if gone {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// procStat is what we use of /proc/<pid>/stat.
type procStat struct {
	state     byte
	ppid      int
	pgrp      int
	startTime uint64
}

func readStat(pid int) (procStat, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseStat(data)
}

func parseStat(data []byte) (procStat, error) {
	// "pid (comm) state ppid pgrp session tty_nr tpgid flags minflt cminflt
	// majflt cmajflt utime stime cutime cstime priority nice num_threads
	// itrealvalue starttime ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return procStat{}, errors.New("malformed stat")
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 20 {
		return procStat{}, errors.New("short stat")
	}
	var st procStat
	st.state = f[0][0]
	st.ppid, _ = strconv.Atoi(f[1])
	st.pgrp, _ = strconv.Atoi(f[2])
	st.startTime, _ = strconv.ParseUint(f[19], 10, 64)
	return st, nil
}

// groupMembers lists the live (non-zombie) processes in process group pgid.
func groupMembers(pgid int) []int {
	return scanProcs(func(st procStat) bool { return st.pgrp == pgid })
}

// scanProcs lists the pids of live (non-zombie) processes matching keep.
func scanProcs(keep func(procStat) bool) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readStat(pid)
		if err != nil || st.state == 'Z' || st.state == 'X' {
			continue
		}
		if keep(st) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// ChildProcesses lists the live (non-zombie) processes whose parent is
// this process. Tests use it to prove Stop left nothing behind.
func ChildProcesses() []int {
	self := os.Getpid()
	return scanProcs(func(st procStat) bool { return st.ppid == self })
}

// tail returns the last n lines of the file at path (at most 64 KiB read).
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	defer f.Close()
	const max = 64 << 10
	fi, err := f.Stat()
	if err != nil {
		return "(" + err.Error() + ")"
	}
	off := fi.Size() - max
	if off < 0 {
		off = 0
	}
	buf := make([]byte, fi.Size()-off)
	nr, _ := f.ReadAt(buf, off)
	lines := strings.Split(strings.TrimRight(string(buf[:nr]), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
