package shutdown

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/skiff-sh/skiff/internal/atomicfile"
)

// logind's and systemd's names on the system bus.
const (
	logindService   = "org.freedesktop.login1"
	logindPath      = dbus.ObjectPath("/org/freedesktop/login1")
	logindInterface = "org.freedesktop.login1.Manager"
	systemdService  = "org.freedesktop.systemd1"
	systemdPath     = dbus.ObjectPath("/org/freedesktop/systemd1")
	systemdManager  = "org.freedesktop.systemd1.Manager"

	// LogindConfDir and logindDropIn are where upstream writes logind's
	// InhibitDelayMaxSec when it is below the shutdown's budget.
	LogindConfDir = "/etc/systemd/logind.conf.d"
	logindDropIn  = "99-kubelet.conf"
)

// Logind is what the manager needs of logind (and of systemd, to make
// logind reload its configuration).
type Logind interface {
	// InhibitDelayMax is how long logind lets a delay inhibitor hold a
	// shutdown.
	InhibitDelayMax(ctx context.Context) (time.Duration, error)
	// Inhibit takes a delay lock on shutdown; closing it releases it.
	Inhibit(ctx context.Context) (io.Closer, error)
	// Reload makes logind read its configuration again.
	Reload(ctx context.Context) error
	// PrepareForShutdown delivers logind's PrepareForShutdown signals:
	// true when a shutdown starts, false when one is cancelled. The
	// channel closes when the connection to the bus ends.
	PrepareForShutdown(ctx context.Context) (<-chan bool, error)
	Close() error
}

// checkTimeout bounds the first call to logind, which tells whether it is
// there at all.
const checkTimeout = 10 * time.Second

// ConnectLogind connects to the system bus (DBUS_SYSTEM_BUS_ADDRESS, or
// the standard socket) and checks that logind answers there. The
// connection closes when ctx ends.
func ConnectLogind(ctx context.Context) (Logind, error) {
	conn, err := dbus.ConnectSystemBus(dbus.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("connect to the system bus: %w", err)
	}
	b := &busLogind{conn: conn}
	cctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	if _, err := b.InhibitDelayMax(cctx); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return b, nil
}

// busLogind is logind over a D-Bus connection.
type busLogind struct {
	conn *dbus.Conn
}

func (b *busLogind) logind() dbus.BusObject { return b.conn.Object(logindService, logindPath) }

func (b *busLogind) InhibitDelayMax(ctx context.Context) (time.Duration, error) {
	var usec uint64
	err := b.logind().CallWithContext(ctx, "org.freedesktop.DBus.Properties.Get", 0,
		logindInterface, "InhibitDelayMaxUSec").Store(&usec)
	if err != nil {
		return 0, fmt.Errorf("read logind's InhibitDelayMaxUSec: %w", err)
	}
	return time.Duration(usec) * time.Microsecond, nil
}

// Inhibit asks for upstream's lock: what "shutdown", mode "delay".
func (b *busLogind) Inhibit(ctx context.Context) (io.Closer, error) {
	var fd dbus.UnixFD
	err := b.logind().CallWithContext(ctx, logindInterface+".Inhibit", 0,
		"shutdown", "kubelet", "Kubelet needs time to handle node shutdown", "delay").Store(&fd)
	if err != nil {
		return nil, fmt.Errorf("take logind's shutdown inhibitor lock: %w", err)
	}
	// The fd came over the socket without close-on-exec: programs Skiff
	// runs (credential providers) must not inherit, and so hold, the lock.
	syscall.CloseOnExec(int(fd))
	return os.NewFile(uintptr(fd), "logind-inhibitor"), nil
}

// Reload sends logind SIGHUP through systemd, as upstream does.
func (b *busLogind) Reload(ctx context.Context) error {
	call := b.conn.Object(systemdService, systemdPath).CallWithContext(ctx, systemdManager+".KillUnit", 0,
		"systemd-logind.service", "all", int32(syscall.SIGHUP))
	if call.Err != nil {
		return fmt.Errorf("make logind reload its configuration: %w", call.Err)
	}
	return nil
}

func (b *busLogind) PrepareForShutdown(ctx context.Context) (<-chan bool, error) {
	err := b.conn.AddMatchSignalContext(ctx, dbus.WithMatchSender(logindService),
		dbus.WithMatchObjectPath(logindPath), dbus.WithMatchInterface(logindInterface),
		dbus.WithMatchMember("PrepareForShutdown"))
	if err != nil {
		return nil, fmt.Errorf("watch logind's PrepareForShutdown: %w", err)
	}
	signals := make(chan *dbus.Signal, 4)
	b.conn.Signal(signals)
	out := make(chan bool, 1)
	go func() {
		defer close(out)
		for s := range signals { // closed when the connection ends
			if s.Path != logindPath || s.Name != logindInterface+".PrepareForShutdown" || len(s.Body) != 1 {
				continue
			}
			if active, ok := s.Body[0].(bool); ok {
				out <- active
			}
		}
	}()
	return out, nil
}

func (b *busLogind) Close() error { return b.conn.Close() }

// writeDropIn sets logind's InhibitDelayMaxSec to d in a drop-in of dir,
// as upstream does (whole seconds, rounded).
func writeDropIn(dir string, d time.Duration) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	content := fmt.Sprintf("# Kubelet logind override\n[Login]\nInhibitDelayMaxSec=%.0f\n", d.Seconds())
	path := filepath.Join(dir, logindDropIn)
	if err := atomicfile.Write(path, []byte(content), 0o644); err != nil {
		return fmt.Errorf("write logind drop-in: %w", err)
	}
	return nil
}
