// Command fakelogind is a small systemd-logind for the end-to-end tests
// of graceful node shutdown, on a private D-Bus system bus
// (DBUS_SYSTEM_BUS_ADDRESS). It owns org.freedesktop.login1 and exports
// the parts of logind's real interface a kubelet uses, as logind does:
//
//   - org.freedesktop.login1.Manager.Inhibit(what, who, why, mode) → fd:
//     the write end of a pipe; the inhibitor lasts until every copy of it
//     is closed, which the fake sees as end-of-file on the read end;
//   - ListInhibitors() → a(ssssuu) (what, who, why, mode, uid, pid);
//   - the InhibitDelayMaxUSec and PreparingForShutdown properties;
//   - PowerOff(interactive): PrepareForShutdown(true), then waits for
//     the delay inhibitors of "shutdown" to go, at most InhibitDelayMaxUSec;
//   - CancelScheduledShutdown(): PrepareForShutdown(false).
//
// It also owns org.freedesktop.systemd1 for KillUnit: SIGHUP to
// systemd-logind.service makes it read InhibitDelayMaxSec again from
// logind.conf and its drop-ins, after the call returns, as logind does.
// One method is the fake's own, for the tests: sh.skiff.FakeLogind.Outcome
// says how the last PowerOff ended: "" while it waits, "released" when
// the inhibitors went in time, "timeout" when the delay ran out first.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/godbus/dbus/v5/introspect"
	"github.com/godbus/dbus/v5/prop"
)

const (
	logindName  = "org.freedesktop.login1"
	logindPath  = dbus.ObjectPath("/org/freedesktop/login1")
	logindIface = "org.freedesktop.login1.Manager"
	systemdName = "org.freedesktop.systemd1"
	systemdPath = dbus.ObjectPath("/org/freedesktop/systemd1")
	fakeIface   = "sh.skiff.FakeLogind"
)

func main() {
	delay := flag.Duration("delay", 5*time.Second, "InhibitDelayMaxUSec until a configuration file says otherwise")
	confDir := flag.String("conf-dir", "/etc/systemd/logind.conf.d", "logind's drop-in directory")
	flag.Parse()
	if err := run(*delay, *confDir); err != nil {
		fmt.Fprintln(os.Stderr, "fakelogind:", err)
		os.Exit(1)
	}
}

func run(delay time.Duration, confDir string) error {
	l := &logind{defaultDelay: delay, confDir: confDir, released: make(chan struct{}, 1)}
	// Inhibit sends its reply itself, with the fd, so that it can close
	// its own copy once the reply is out: godbus must not reply again.
	conn, err := dbus.ConnectSystemBus(dbus.WithIncomingInterceptor(func(m *dbus.Message) {
		if member, _ := m.Headers[dbus.FieldMember].Value().(string); m.Type == dbus.TypeMethodCall && member == "Inhibit" {
			m.Flags |= dbus.FlagNoReplyExpected
		}
	}))
	if err != nil {
		return err
	}
	defer conn.Close()
	l.conn = conn
	if err := l.export(); err != nil {
		return err
	}
	for _, name := range []string{logindName, systemdName} {
		reply, err := conn.RequestName(name, dbus.NameFlagDoNotQueue)
		if err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
			return fmt.Errorf("own %s: %v (reply %d)", name, err, reply)
		}
	}
	fmt.Println("fakelogind: ready")
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	<-sigs
	return nil
}

// export puts the fake's objects on the bus.
func (l *logind) export() error {
	props, err := prop.Export(l.conn, logindPath, prop.Map{logindIface: {
		"InhibitDelayMaxUSec":  {Value: uint64(l.defaultDelay / time.Microsecond), Emit: prop.EmitTrue},
		"PreparingForShutdown": {Value: false, Emit: prop.EmitTrue},
	}})
	if err != nil {
		return err
	}
	l.props = props
	methods := map[string]interface{}{
		"Inhibit":                 l.Inhibit,
		"ListInhibitors":          l.ListInhibitors,
		"PowerOff":                l.PowerOff,
		"CancelScheduledShutdown": l.CancelScheduledShutdown,
	}
	if err := l.conn.ExportMethodTable(methods, logindPath, logindIface); err != nil {
		return err
	}
	if err := l.conn.ExportMethodTable(map[string]interface{}{"Outcome": l.Outcome}, logindPath, fakeIface); err != nil {
		return err
	}
	if err := l.conn.Export(systemd{l}, systemdPath, systemdName+".Manager"); err != nil {
		return err
	}
	node := &introspect.Node{Name: string(logindPath), Interfaces: []introspect.Interface{
		introspect.IntrospectData, prop.IntrospectData,
		{Name: logindIface, Properties: props.Introspection(logindIface), Signals: []introspect.Signal{
			{Name: "PrepareForShutdown", Args: []introspect.Arg{{Name: "start", Type: "b"}}},
		}},
	}}
	return l.conn.Export(introspect.NewIntrospectable(node), logindPath, "org.freedesktop.DBus.Introspectable")
}

// systemd is the one call of systemd's manager a kubelet makes.
type systemd struct{ l *logind }

// KillUnit with SIGHUP to systemd-logind.service reloads the fake's
// configuration; it returns before the reload, as systemd does.
func (s systemd) KillUnit(name, who string, sig int32) *dbus.Error {
	if name != "systemd-logind.service" {
		return dbus.NewError("org.freedesktop.systemd1.NoSuchUnit", []interface{}{"Unit " + name + " not loaded."})
	}
	if syscall.Signal(sig) == syscall.SIGHUP {
		go s.l.reload()
	}
	return nil
}
