package action

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	remote "k8s.io/cri-client/pkg"
	utilexec "k8s.io/utils/exec"
)

// Execer runs a command in a container; CRI's RuntimeService fits.
type Execer interface {
	ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (stdout, stderr []byte, err error)
}

// RunInContainer runs cmd in the container through CRI ExecSync (timeout 0:
// none but ctx) and returns stdout and stderr together, at most 10 KiB. A
// non-zero exit is an error that utilexec.ExitError matches.
func RunInContainer(ctx context.Context, e Execer, containerID string, cmd []string, timeout time.Duration) ([]byte, error) {
	stdout, stderr, err := e.ExecSync(ctx, containerID, cmd, timeout)
	out := append(stdout, stderr...)
	if len(out) > maxOutput {
		out = out[:maxOutput]
	}
	return out, err
}

// Exec is an exec probe: exit code 0 is success, any other a failure with
// the command's output; a command still running at timeout fails too.
// An error is the runtime's: the probe could not run.
func Exec(ctx context.Context, e Execer, containerID string, cmd []string, timeout time.Duration) (Result, string, error) {
	out, err := RunInContainer(ctx, e, containerID, cmd, timeout)
	var exit utilexec.ExitError
	switch {
	case err == nil:
		return Success, string(out), nil
	case errors.As(err, &exit):
		if exit.ExitStatus() == 0 {
			return Success, string(out), nil
		}
		return Failure, string(out), nil
	case errors.Is(err, remote.ErrCommandTimedOut), status.Code(err) == codes.DeadlineExceeded:
		return Failure, fmt.Sprintf("command %q timed out", strings.Join(cmd, " ")), nil
	}
	return Unknown, "", err
}
