package podruntime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
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
// Like upstream, a file that cannot be made (a full disk) costs the
// message, not the container.
func (m *Manager) terminationMessageMount(pod *v1.Pod, c *v1.Container) *runtimeapi.Mount {
	if m.cfg.PodDir == nil || c.TerminationMessagePath == "" {
		return nil
	}
	path, err := createTermFile(m.cfg.PodDir(pod.UID), c.Name)
	if err != nil {
		klog.ErrorS(err, "Cannot make the termination message file; the container gets none", "pod", klog.KObj(pod), "container", c.Name)
		return nil
	}
	return &runtimeapi.Mount{HostPath: path, ContainerPath: c.TerminationMessagePath}
}

// podDir is the pod's own directory, or "" when Skiff keeps none.
func (m *Manager) podDir(uid types.UID) string {
	if m.cfg.PodDir == nil {
		return ""
	}
	return m.cfg.PodDir(uid)
}

// addTerminationMessage completes an exited container's message as
// upstream does: the runtime's message, then ": " and what the container
// wrote to its terminationMessagePath; with FallbackToLogsOnError, a
// failed container that wrote nothing there gets the end of its log.
// Only the file Skiff made for the container in podDir is read: a volume
// mounted at the same path (upstream reads the first mount there) holds
// host content the pod may read but must not publish in its status.
func addTerminationMessage(ctx context.Context, podDir string, s *runtimeapi.ContainerStatus, cs *container.ContainerStatus) {
	path := s.Annotations[cri.TerminationMessagePathAnno]
	var own termFile
	for _, mnt := range s.Mounts {
		if path == "" || mnt.ContainerPath != path {
			continue
		}
		if f, ok := ownTermFile(podDir, cs.Name, mnt.HostPath); ok {
			own, cs.TerminationMessageFile = f, mnt.HostPath
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
		b, err := own.read(MaxTerminationMessageLength)
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

// removeContainerFiles removes what a removed container leaves on the
// node, in Skiff's own directories only: its log with the rotated files
// (under logsDir), and its termination message file when that is the one
// Skiff made in the pod directory podDir.
func removeContainerFiles(podDir, logsDir string, cs *container.ContainerStatus) {
	if cs.LogPath != "" {
		if err := removeLogFiles(logsDir, cs.LogPath); err != nil {
			klog.V(2).InfoS("Cannot remove a removed container's logs", "path", cs.LogPath, "err", err)
		}
	}
	if cs.TerminationMessageFile == "" {
		return
	}
	tf, ok := ownTermFile(podDir, cs.Name, cs.TerminationMessageFile)
	if !ok {
		klog.InfoS("Not removing a termination message file Skiff did not make", "path", cs.TerminationMessageFile, "container", cs.Name)
		return
	}
	if err := tf.remove(); err != nil {
		klog.V(2).InfoS("Cannot remove a removed container's file", "path", cs.TerminationMessageFile, "err", err)
	}
}

// removeLogFiles unlinks a log and its rotated files, which share its
// directory, relative to a held descriptor of that directory; a log
// outside logsDir is not Skiff's to remove.
func removeLogFiles(logsDir, logPath string) error {
	dir := filepath.Dir(logPath)
	if rel, err := filepath.Rel(logsDir, dir); logsDir == "" || err != nil || !filepath.IsLocal(rel) {
		return fmt.Errorf("%s is not under the pod logs directory %q", logPath, logsDir)
	}
	rotated, err := logs.RotatedFiles(logPath)
	if err != nil {
		return err
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer unix.Close(fd)
	var errs []error
	for _, f := range append([]string{logPath}, rotated...) {
		if filepath.Dir(f) != dir {
			continue
		}
		if err := unix.Unlinkat(fd, filepath.Base(f), 0); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("remove %s: %w", f, err))
		}
	}
	return errors.Join(errs...)
}
