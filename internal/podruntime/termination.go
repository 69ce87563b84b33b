package podruntime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/cri"
	"github.com/skiff-sh/skiff/internal/logs"
)

// Termination message limits, upstream's: what a container writes to its
// terminationMessagePath is read up to its last 4 KiB; a message taken
// from the log (FallbackToLogsOnError) is the last 80 lines, and of those
// the last 2 KiB.
const (
	MaxTerminationMessageLength    = 4 << 10
	MaxTerminationMessageLogLength = 2 << 10
	MaxTerminationMessageLogLines  = 80
)

// Reasons of containers that never ran: Docker's name, which upstream
// knows, and containerd's for a failed StartContainer.
const (
	ReasonContainerCannotRun = "ContainerCannotRun"
	ReasonStartError         = "StartError"
)

// terminationMessageMount makes the file a container attempt writes its
// termination message to, <pod dir>/containers/<name>/<random>, as
// upstream lays it out, and returns its mount at terminationMessagePath.
// Like upstream, a file that cannot be made costs the message, not the
// container.
func (m *Manager) terminationMessageMount(pod *v1.Pod, c *v1.Container) *runtimeapi.Mount {
	if m.cfg.PodDir == nil || c.TerminationMessagePath == "" {
		return nil
	}
	path, err := newTerminationMessageFile(filepath.Join(m.cfg.PodDir(pod.UID), "containers", c.Name))
	if err != nil {
		klog.ErrorS(err, "Cannot make the termination message file; the container gets none", "pod", klog.KObj(pod), "container", c.Name)
		return nil
	}
	return &runtimeapi.Mount{HostPath: path, ContainerPath: c.TerminationMessagePath}
}

func newTerminationMessageFile(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", err
	}
	var id [4]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", err
	}
	path := filepath.Join(dir, hex.EncodeToString(id[:]))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o666)
	if err != nil {
		return "", err
	}
	f.Close()
	// Whatever the umask, any user the container runs as may write it.
	return path, os.Chmod(path, 0o666)
}

// addTerminationMessage completes an exited container's message as
// upstream does: the runtime's message, then ": " and what the container
// wrote to its terminationMessagePath; with FallbackToLogsOnError, a
// failed container that wrote nothing there gets the end of its log.
func addTerminationMessage(ctx context.Context, s *runtimeapi.ContainerStatus, cs *container.ContainerStatus) {
	path := s.Annotations[cri.TerminationMessagePathAnno]
	for _, mnt := range s.Mounts {
		if path != "" && mnt.ContainerPath == path {
			cs.TerminationMessageFile = mnt.HostPath
		}
	}
	if s.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		return
	}
	// A container that could not even start has no log to fall back on.
	fallback := s.Annotations[cri.TerminationMessagePolicyAnno] == string(v1.TerminationMessageFallbackToLogsOnError) &&
		cs.ExitCode != 0 && cs.Reason != ReasonContainerCannotRun && cs.Reason != ReasonStartError
	msg, useLog := "", fallback
	if cs.TerminationMessageFile != "" {
		b, err := readLast(cs.TerminationMessageFile, MaxTerminationMessageLength)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			msg, useLog = fmt.Sprintf("Error on reading termination log %s: %v", cs.TerminationMessageFile, err), false
		default:
			msg, useLog = string(b), fallback && len(b) == 0
		}
	}
	if useLog && s.LogPath != "" {
		tail, err := logs.Tail(ctx, s.LogPath, MaxTerminationMessageLogLines, MaxTerminationMessageLogLength)
		if err != nil {
			tail = fmt.Sprintf("Error on reading termination message from logs: %v", err)
		}
		msg = tail
	}
	if msg == "" {
		return
	}
	if cs.Message != "" {
		cs.Message += ": "
	}
	cs.Message += msg
}

// readLast reads at most the last max bytes of a file.
func readLast(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > max {
		if _, err := f.Seek(fi.Size()-max, io.SeekStart); err != nil {
			return nil, err
		}
	}
	return io.ReadAll(io.LimitReader(f, max))
}

// removeContainerFiles removes what a removed container leaves on the
// node: its log with the rotated files, and its termination message file.
func removeContainerFiles(cs *container.ContainerStatus) {
	var files []string
	if cs.LogPath != "" {
		rotated, _ := logs.RotatedFiles(cs.LogPath)
		files = append(append(files, cs.LogPath), rotated...)
	}
	if cs.TerminationMessageFile != "" {
		files = append(files, cs.TerminationMessageFile)
	}
	for _, f := range files {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			klog.V(2).InfoS("Cannot remove a removed container's file", "path", f, "err", err)
		}
	}
}
