package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/godbus/dbus/v5/prop"
)

// logind is the fake's state.
type logind struct {
	conn         *dbus.Conn
	props        *prop.Properties
	defaultDelay time.Duration
	confDir      string
	// released is poked whenever an inhibitor goes.
	released chan struct{}

	mu         sync.Mutex
	inhibitors []*inhibitor
	preparing  bool
	outcome    string
}

// inhibitor is one lock: ListInhibitors' fields and the pipe's read end.
type inhibitor struct {
	what, who, why, mode string
	uid, pid             uint32
	r                    *os.File
}

// Inhibit hands out the write end of a new pipe and sends the reply
// itself (the incoming interceptor told godbus not to): only once the
// fd is on its way may the fake close its own copy.
func (l *logind) Inhibit(msg dbus.Message, what, who, why, mode string) *dbus.Error {
	if mode != "delay" && mode != "block" {
		l.replyError(msg, "org.freedesktop.DBus.Error.InvalidArgs", "Invalid mode specification "+mode)
		return nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		l.replyError(msg, "org.freedesktop.DBus.Error.Failed", err.Error())
		return nil
	}
	sender, _ := msg.Headers[dbus.FieldSender].Value().(string)
	in := &inhibitor{what: what, who: who, why: why, mode: mode, r: r}
	in.uid, in.pid = l.credentials(sender)
	l.mu.Lock()
	l.inhibitors = append(l.inhibitors, in)
	l.mu.Unlock()
	reply := &dbus.Message{Type: dbus.TypeMethodReply, Headers: map[dbus.HeaderField]dbus.Variant{
		dbus.FieldDestination: dbus.MakeVariant(sender),
		dbus.FieldReplySerial: dbus.MakeVariant(msg.Serial()),
		dbus.FieldSignature:   dbus.MakeVariant(dbus.SignatureOf(dbus.UnixFD(0))),
	}, Body: []interface{}{dbus.UnixFD(w.Fd())}}
	if call := l.conn.Send(reply, nil); call.Err != nil {
		fmt.Println("fakelogind: reply to Inhibit:", call.Err)
	}
	w.Close()
	fmt.Printf("fakelogind: inhibitor taken: %s by %s (pid %d), mode %s\n", what, who, in.pid, mode)
	go l.watch(in)
	return nil
}

// watch drops the inhibitor once every copy of its fd is closed.
func (l *logind) watch(in *inhibitor) {
	_, _ = io.Copy(io.Discard, in.r) // end of file: no writer left
	in.r.Close()
	l.mu.Lock()
	for i, x := range l.inhibitors {
		if x == in {
			l.inhibitors = append(l.inhibitors[:i], l.inhibitors[i+1:]...)
			break
		}
	}
	l.mu.Unlock()
	fmt.Printf("fakelogind: inhibitor released: %s by %s (pid %d)\n", in.what, in.who, in.pid)
	select {
	case l.released <- struct{}{}:
	default:
	}
}

func (l *logind) credentials(sender string) (uid, pid uint32) {
	bus := l.conn.BusObject()
	_ = bus.Call("org.freedesktop.DBus.GetConnectionUnixUser", 0, sender).Store(&uid)
	_ = bus.Call("org.freedesktop.DBus.GetConnectionUnixProcessID", 0, sender).Store(&pid)
	return uid, pid
}

func (l *logind) replyError(msg dbus.Message, name, text string) {
	sender, _ := msg.Headers[dbus.FieldSender].Value().(string)
	e := &dbus.Message{Type: dbus.TypeError, Headers: map[dbus.HeaderField]dbus.Variant{
		dbus.FieldDestination: dbus.MakeVariant(sender),
		dbus.FieldReplySerial: dbus.MakeVariant(msg.Serial()),
		dbus.FieldErrorName:   dbus.MakeVariant(name),
		dbus.FieldSignature:   dbus.MakeVariant(dbus.SignatureOf(text)),
	}, Body: []interface{}{text}}
	l.conn.Send(e, nil)
}

// inhibitorEntry is one of ListInhibitors' a(ssssuu).
type inhibitorEntry struct {
	What, Who, Why, Mode string
	UID, PID             uint32
}

func (l *logind) ListInhibitors() ([]inhibitorEntry, *dbus.Error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := []inhibitorEntry{}
	for _, in := range l.inhibitors {
		out = append(out, inhibitorEntry{in.what, in.who, in.why, in.mode, in.uid, in.pid})
	}
	return out, nil
}

// delayers counts the delay inhibitors of shutdown.
func (l *logind) delayers() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, in := range l.inhibitors {
		if in.mode == "delay" && strings.Contains(in.what, "shutdown") {
			n++
		}
	}
	return n
}

// PowerOff starts a shutdown: PrepareForShutdown(true), then the delay.
func (l *logind) PowerOff(interactive bool) *dbus.Error {
	l.mu.Lock()
	if l.preparing {
		l.mu.Unlock()
		return dbus.NewError("org.freedesktop.login1.OperationInProgress", []interface{}{"There's already a shutdown operation in progress"})
	}
	l.preparing, l.outcome = true, ""
	l.mu.Unlock()
	l.props.SetMust(logindIface, "PreparingForShutdown", true)
	delay := l.delay()
	if err := l.conn.Emit(logindPath, logindIface+".PrepareForShutdown", true); err != nil {
		return dbus.MakeFailedError(err)
	}
	fmt.Printf("fakelogind: PrepareForShutdown(true), waiting up to %v for %d delay inhibitors\n", delay, l.delayers())
	go l.awaitInhibitors(delay)
	return nil
}

// awaitInhibitors waits for the delay inhibitors to go, at most delay.
func (l *logind) awaitInhibitors(delay time.Duration) {
	timeout := time.After(delay)
	outcome := "released"
	for l.delayers() > 0 && outcome == "released" {
		select {
		case <-l.released:
		case <-timeout:
			outcome = "timeout"
		}
	}
	l.mu.Lock()
	l.outcome = outcome
	l.mu.Unlock()
	fmt.Println("fakelogind: powering off:", outcome)
}

// CancelScheduledShutdown ends a shutdown in progress: PrepareForShutdown(false).
func (l *logind) CancelScheduledShutdown() (bool, *dbus.Error) {
	l.mu.Lock()
	was := l.preparing
	l.preparing = false
	l.mu.Unlock()
	if !was {
		return false, nil
	}
	l.props.SetMust(logindIface, "PreparingForShutdown", false)
	if err := l.conn.Emit(logindPath, logindIface+".PrepareForShutdown", false); err != nil {
		return false, dbus.MakeFailedError(err)
	}
	fmt.Println("fakelogind: PrepareForShutdown(false)")
	return true, nil
}

// Outcome says how the last PowerOff ended ("" while it waits).
func (l *logind) Outcome() (string, *dbus.Error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.outcome, nil
}

func (l *logind) delay() time.Duration {
	v, _ := l.props.Get(logindIface, "InhibitDelayMaxUSec")
	usec, _ := v.Value().(uint64)
	return time.Duration(usec) * time.Microsecond
}

// reload reads InhibitDelayMaxSec from logind.conf and the drop-ins, in
// logind's order (the main file, then the drop-ins by name; the last
// setting wins); the flag's value when none sets it.
func (l *logind) reload() {
	files := []string{filepath.Join(filepath.Dir(l.confDir), "logind.conf")}
	dropIns, _ := filepath.Glob(filepath.Join(l.confDir, "*.conf"))
	sort.Strings(dropIns)
	delay := l.defaultDelay
	for _, f := range append(files, dropIns...) {
		if d, ok := readDelay(f); ok {
			delay = d
		}
	}
	l.props.SetMust(logindIface, "InhibitDelayMaxUSec", uint64(delay/time.Microsecond))
	fmt.Println("fakelogind: reloaded: InhibitDelayMaxUSec", delay)
}

func readDelay(path string) (time.Duration, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	var d time.Duration
	found := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "InhibitDelayMaxSec=")
		if !ok {
			continue
		}
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
			d, found = time.Duration(n)*time.Second, true
		}
	}
	return d, found
}
