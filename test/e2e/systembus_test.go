//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
)

// startSystemBus runs a D-Bus system bus of the test's own (dbus-daemon,
// from Debian's dbus package, which make deps installs) and returns its
// address, what DBUS_SYSTEM_BUS_ADDRESS names. Anyone may own any name
// and call anything on it: it carries only the test's fakes.
func startSystemBus(t *testing.T) string {
	t.Helper()
	daemon, err := exec.LookPath("dbus-daemon")
	if err != nil {
		t.Fatal("dbus-daemon is missing: `make deps` installs it (Debian package dbus)")
	}
	// Short: a socket's path has at most 107 bytes; t.TempDir's may be longer.
	dir, err := os.MkdirTemp("", "skiff-bus-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "system_bus_socket")
	conf := filepath.Join(dir, "bus.conf")
	must(t, os.WriteFile(conf, []byte(fmt.Sprintf(`<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=%s</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
`, sock)), 0o644))
	cmd := exec.Command(daemon, "--config-file="+conf, "--nofork", "--nopidfile")
	logPath := filepath.Join(dir, "dbus-daemon.log")
	logf, err := os.Create(logPath)
	must(t, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	must(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
	})
	addr := "unix:path=" + sock
	waitFor(t, 10*time.Second, "the test's D-Bus system bus", func() (bool, error) {
		c, err := dbus.Connect(addr)
		if err != nil {
			return false, nil
		}
		c.Close()
		return true, nil
	})
	return addr
}

// fakeLogind is cmd/fakelogind on a test's bus, and the test's own
// connection to it.
type fakeLogind struct {
	t   *testing.T
	obj dbus.BusObject
}

// inhibitorInfo is one of logind's ListInhibitors entries.
type inhibitorInfo struct {
	What, Who, Why, Mode string
	UID, PID             uint32
}

// startFakeLogind runs cmd/fakelogind on the bus at addr with
// InhibitDelayMaxUSec delay; it reads logind's real configuration
// directory on reload.
func startFakeLogind(t *testing.T, addr string, delay time.Duration) *fakeLogind {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "fakelogind")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/fakelogind").CombinedOutput(); err != nil {
		t.Fatalf("build fakelogind: %v\n%s", err, out)
	}
	logPath := filepath.Join(t.TempDir(), "fakelogind.log")
	logf, err := os.Create(logPath)
	must(t, err)
	cmd := exec.Command(bin, "-delay", delay.String())
	cmd.Env = append(os.Environ(), "DBUS_SYSTEM_BUS_ADDRESS="+addr)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	must(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("fakelogind log:\n%s", b)
		}
	})
	conn, err := dbus.Connect(addr)
	must(t, err)
	t.Cleanup(func() { conn.Close() })
	f := &fakeLogind{t: t, obj: conn.Object("org.freedesktop.login1", "/org/freedesktop/login1")}
	waitFor(t, 20*time.Second, "fakelogind on the bus", func() (bool, error) {
		_, err := f.obj.GetProperty("org.freedesktop.login1.Manager.InhibitDelayMaxUSec")
		return err == nil, nil
	})
	return f
}

func (f *fakeLogind) inhibitors() []inhibitorInfo {
	f.t.Helper()
	var out []inhibitorInfo
	must(f.t, f.obj.Call("org.freedesktop.login1.Manager.ListInhibitors", 0).Store(&out))
	return out
}

func (f *fakeLogind) inhibitDelayMax() time.Duration {
	f.t.Helper()
	v, err := f.obj.GetProperty("org.freedesktop.login1.Manager.InhibitDelayMaxUSec")
	must(f.t, err)
	usec, _ := v.Value().(uint64)
	return time.Duration(usec) * time.Microsecond
}

// powerOff starts a shutdown (PrepareForShutdown(true)); cancel cancels it
// (PrepareForShutdown(false)).
func (f *fakeLogind) powerOff() {
	f.t.Helper()
	must(f.t, f.obj.Call("org.freedesktop.login1.Manager.PowerOff", 0, false).Err)
}

func (f *fakeLogind) cancel() {
	f.t.Helper()
	must(f.t, f.obj.Call("org.freedesktop.login1.Manager.CancelScheduledShutdown", 0).Err)
}

// waitPoweredOff waits for logind to end the shutdown's delay and returns
// how: "released" (no delay inhibitor was left) or "timeout".
func (f *fakeLogind) waitPoweredOff(timeout time.Duration) string {
	f.t.Helper()
	var outcome string
	waitFor(f.t, timeout, "logind to power off", func() (bool, error) {
		err := f.obj.Call("sh.skiff.FakeLogind.Outcome", 0).Store(&outcome)
		return err == nil && outcome != "", err
	})
	return outcome
}
