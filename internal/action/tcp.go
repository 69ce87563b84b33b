package action

import (
	"context"
	"net"
	"strconv"
	"syscall"
	"time"
)

// dialer dials with SO_LINGER of 1 s so that probing connections, closed
// at once, do not pile up in TIME_WAIT, as upstream's probe dialer does.
func dialer() *net.Dialer {
	return &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) {
			_ = syscall.SetsockoptLinger(int(fd), syscall.SOL_SOCKET, syscall.SO_LINGER, &syscall.Linger{Onoff: 1, Linger: 1})
		})
	}}
}

// TCP is a tcpSocket probe: a connection that opens within timeout is a
// success; anything else (refused, timed out) a failure with its error.
func TCP(ctx context.Context, host string, port int, timeout time.Duration) (Result, string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := dialer().DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return Failure, err.Error(), nil
	}
	_ = conn.Close()
	return Success, "", nil
}
