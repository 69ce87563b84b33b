// Package loglinks keeps the container log links that log shippers
// (fluent-bit, Fluentd, Promtail, Vector, Filebeat) read by default:
// /var/log/containers/<pod>_<namespace>_<container>-<container ID>.log, a
// symlink to the container's log file under the pod logs directory. As
// upstream's kubelet does, a link is made when its container has started
// and removed with the container; Reconcile tidies up after a restart.
//
// Every operation works relative to a descriptor of the directory held
// from Open, so no name is resolved through a symlink someone put in the
// path, and an entry is removed only if it is a symlink: anything else in
// the directory, whatever its name, is left alone.
package loglinks

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// DefaultDir is where upstream's kubelet keeps the links, whatever its
// podLogsDir.
const DefaultDir = "/var/log/containers"

const (
	suffix = ".log"
	// maxNameLen is ext4's limit on a file name: longer names are cut, as
	// upstream cuts them.
	maxNameLen = 255
)

// Container names the container a link is for.
type Container struct {
	Pod, Namespace string // the pod's name and namespace
	Name           string // the container's name
	ID             string // the runtime's container ID, without a scheme
}

// Name is the link's file name, upstream's:
// <pod>_<namespace>_<container>-<ID>.log, cut to 255 bytes.
func Name(c Container) string {
	base := fmt.Sprintf("%s_%s_%s-%s", c.Pod, c.Namespace, c.Name, c.ID)
	if len(base) > maxNameLen-len(suffix) {
		base = base[:maxNameLen-len(suffix)]
	}
	return base + suffix
}

// idOf is the container ID in a link's name, if the name has upstream's
// shape; a name cut to 255 bytes may have lost it.
func idOf(name string) (string, bool) {
	base, ok := strings.CutSuffix(name, suffix)
	if !ok || strings.Count(base, "_") != 2 {
		return "", false
	}
	i := strings.LastIndexByte(base, '-')
	if i < 0 || i < strings.LastIndexByte(base, '_') || len(base)-i-1 < 6 {
		return "", false
	}
	return base[i+1:], true
}

// Links is the directory of links, held open.
type Links struct {
	dir        *os.File
	path       string
	podLogsDir string // links point only below it
}

// Open creates the directory at path if it is missing, as upstream does at
// start, and holds it open. Links will point only to files below
// podLogsDir.
func Open(path, podLogsDir string) (*Links, error) {
	if !filepath.IsAbs(podLogsDir) {
		return nil, fmt.Errorf("container log links: pod logs directory %q is not absolute", podLogsDir)
	}
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, fmt.Errorf("create the container log links directory: %w", err)
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open the container log links directory %s: %w", path, err)
	}
	return &Links{dir: os.NewFile(uintptr(fd), path), path: path, podLogsDir: filepath.Clean(podLogsDir)}, nil
}

// Close lets the directory go.
func (l *Links) Close() error { return l.dir.Close() }

// Path is the directory's path.
func (l *Links) Path() string { return l.path }

func (l *Links) fd() int { return int(l.dir.Fd()) }

// Link makes the link of a started container to its log file logPath. As
// upstream, no link is made while the log file does not exist (a
// dangling one would only be removed again). A link of that name that
// already points at logPath is kept.
func (l *Links) Link(c Container, logPath string) error {
	if !l.below(logPath) {
		return fmt.Errorf("container %s log %q is not below %s: not linked", c.ID, logPath, l.podLogsDir)
	}
	if _, err := os.Lstat(logPath); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	name := Name(c)
	err := unix.Symlinkat(logPath, l.fd(), name)
	if errors.Is(err, unix.EEXIST) {
		if target, rerr := l.readlink(name); rerr == nil && target == logPath {
			return nil
		}
		return fmt.Errorf("link %s: %s exists and is not this container's link", logPath, filepath.Join(l.path, name))
	}
	if err != nil {
		return fmt.Errorf("link %s to %s: %w", filepath.Join(l.path, name), logPath, err)
	}
	return nil
}

// Unlink removes a removed container's link. An entry of that name that is
// not a symlink is not Skiff's: it stays, and Unlink says so.
func (l *Links) Unlink(c Container) error {
	name := Name(c)
	isLink, err := l.isSymlink(name)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil
	case err != nil:
		return fmt.Errorf("unlink %s: %w", filepath.Join(l.path, name), err)
	case !isLink:
		return fmt.Errorf("%s is not a symlink: left alone", filepath.Join(l.path, name))
	}
	return l.unlink(name)
}

// unlink removes the entry name. unlinkat never follows a symlink: it
// removes the link itself. Between the check that an entry is a symlink
// and this, only someone who may write to the directory can swap it, and
// then only an entry of that name, in that directory, goes.
func (l *Links) unlink(name string) error {
	if err := unix.Unlinkat(l.fd(), name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unlink %s: %w", filepath.Join(l.path, name), err)
	}
	return nil
}

func (l *Links) isSymlink(name string) (bool, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(l.fd(), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return false, err
	}
	return st.Mode&unix.S_IFMT == unix.S_IFLNK, nil
}

func (l *Links) readlink(name string) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(l.fd(), name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// below reports whether p is an absolute path below the pod logs
// directory.
func (l *Links) below(p string) bool {
	if !filepath.IsAbs(p) {
		return false
	}
	rel, err := filepath.Rel(l.podLogsDir, p)
	return err == nil && rel != "." && filepath.IsLocal(rel)
}
