// Command pause is Skiff's pod sandbox ("infra") process.
//
// It is the first process of every pod sandbox: it holds the pod's
// namespaces open, does nothing else, and exits cleanly when the runtime
// stops the sandbox. Because it is PID 1 of the pod's PID namespace (when
// the namespace is shared), orphaned processes are re-parented to it, so it
// must also reap them or they would stay zombies forever.
//
// Build it static so the image needs nothing but this one file:
//
//	CGO_ENABLED=0 go build -o bin/pause ./cmd/pause
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// Buffered so a signal arriving while we reap is never lost; SIGCHLD is
	// coalesced by the kernel anyway, which is why reap loops until empty.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)

	for sig := range sigs {
		switch sig {
		case syscall.SIGCHLD:
			reap()
		default:
			// SIGINT/SIGTERM: the runtime is stopping the sandbox.
			fmt.Fprintf(os.Stderr, "pause: shutting down on %v\n", sig)
			os.Exit(0)
		}
	}
}

// reap collects every child that has exited, without blocking.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		// pid 0: children exist but none has exited; ECHILD: no children.
		if pid <= 0 || err != nil {
			return
		}
	}
}
