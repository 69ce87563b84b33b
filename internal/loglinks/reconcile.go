package loglinks

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/cri"
)

// Runtime is the part of the CRI runtime service Reconcile needs;
// k8s.io/cri-api's RuntimeService fits.
type Runtime interface {
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error)
}

// Reconcile brings the directory in line with the runtime after a
// restart: it removes the links of containers that are gone and makes the
// missing links of running containers.
//
// A link is gone when the runtime does not know its container and the
// link dangles (its log file was removed with the container), as
// upstream's container GC judges it. A link that still resolves stays even
// if this runtime does not know its container: it may be another
// kubelet's on the same host, or a log being rotated. Only symlinks named
// *.log that point below the pod logs directory are considered.
func (l *Links) Reconcile(ctx context.Context, rt Runtime) error {
	// The directory first, the runtime second: a link made in between
	// belongs to a container the listing then shows.
	names, err := l.names()
	if err != nil {
		return err
	}
	containers, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{})
	if err != nil {
		return fmt.Errorf("container log links: list containers: %w", err)
	}
	known := make(map[string]bool, len(containers))
	for _, c := range containers {
		known[c.Id] = true
	}
	var errs []error
	removed, made := 0, 0
	for name := range names {
		gone, err := l.gone(name, known)
		if err == nil && gone {
			if err = l.unlink(name); err == nil {
				removed++
				delete(names, name)
			}
		}
		errs = append(errs, err)
	}
	for _, c := range containers {
		if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		ref := Of(c)
		if ref.Pod == "" || ref.Namespace == "" || ref.Name == "" || names[Name(ref)] {
			continue
		}
		resp, err := rt.ContainerStatus(ctx, c.Id, false)
		if err != nil {
			if !cri.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("container log links: status of %s: %w", c.Id, err))
			}
			continue
		}
		if err := l.Link(ref, resp.GetStatus().GetLogPath()); err != nil {
			errs = append(errs, err)
			continue
		}
		made++
	}
	klog.InfoS("Container log links reconciled", "dir", l.path, "removed", removed, "made", made)
	return errors.Join(errs...)
}

// Of names a container the runtime lists, from the labels the kubelet
// gave it.
func Of(c *runtimeapi.Container) Container {
	return Container{Pod: c.Labels[cri.PodNameLabel], Namespace: c.Labels[cri.PodNamespaceLabel],
		Name: c.Labels[cri.ContainerNameLabel], ID: c.Id}
}

// names lists the directory's entries named *.log.
func (l *Links) names() (map[string]bool, error) {
	// A descriptor of its own: reading a directory moves its offset.
	fd, err := unix.Openat(l.fd(), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("container log links: open %s: %w", l.path, err)
	}
	d := os.NewFile(uintptr(fd), l.path)
	defer d.Close()
	all, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("container log links: read %s: %w", l.path, err)
	}
	names := map[string]bool{}
	for _, n := range all {
		if strings.HasSuffix(n, suffix) {
			names[n] = true
		}
	}
	return names, nil
}

// gone reports whether the entry name is a link of a container that is
// gone (see Reconcile).
func (l *Links) gone(name string, known map[string]bool) (bool, error) {
	if id, ok := idOf(name); ok && known[id] {
		return false, nil
	}
	isLink, err := l.isSymlink(name)
	if err != nil || !isLink {
		return false, ignoreNotExist(err)
	}
	target, err := l.readlink(name)
	if err != nil || !l.below(target) {
		return false, ignoreNotExist(err)
	}
	// Whether the link resolves, through the held directory.
	var st unix.Stat_t
	err = unix.Fstatat(l.fd(), name, &st, 0)
	return errors.Is(err, unix.ENOENT), nil
}

func ignoreNotExist(err error) error {
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}
