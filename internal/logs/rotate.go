package logs

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// Rotated files are <log>.<time in this format>, compressed to .gz once
// a newer one exists, as upstream names them.
const (
	rotatedTimeFormat = "20060102-150405"
	gzSuffix          = ".gz"
	tmpSuffix         = ".tmp"
)

// RotateRuntime is the part of the CRI runtime service rotation needs;
// k8s.io/cri-api's RuntimeService fits.
type RotateRuntime interface {
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error)
	ReopenContainerLog(ctx context.Context, id string) error
}

// RotateConfig configures a Rotator, from the KubeletConfiguration's
// containerLog* fields.
type RotateConfig struct {
	Runtime RotateRuntime
	// MaxSize is the size in bytes above which a running container's log
	// is rotated (containerLogMaxSize).
	MaxSize int64
	// MaxFiles is how many files a container's log may have, the one
	// being written included (containerLogMaxFiles, at least 2).
	MaxFiles int
	// Workers rotate that many containers' logs at once
	// (containerLogMaxWorkers).
	Workers int
	// Interval between two looks at the logs (containerLogMonitorInterval).
	Interval time.Duration
	// Now names rotated files; nil: time.Now.
	Now func() time.Time
}

// Rotator rotates the logs of running containers as upstream's container
// log manager does: a log over MaxSize is renamed to <log>.<time> and the
// runtime reopens the log; older rotated files are gzipped and the oldest
// removed, so that a container keeps at most MaxFiles files.
type Rotator struct {
	cfg RotateConfig
}

// NewRotator returns a Rotator.
func NewRotator(cfg RotateConfig) *Rotator {
	cfg.Workers = max(cfg.Workers, 1)
	cfg.MaxFiles = max(cfg.MaxFiles, 2)
	if cfg.Interval <= 0 {
		cfg.Interval = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Rotator{cfg: cfg}
}

// Run rotates every Interval until ctx ends.
func (r *Rotator) Run(ctx context.Context) {
	klog.InfoS("Rotating container logs", "maxSize", r.cfg.MaxSize, "maxFiles", r.cfg.MaxFiles, "workers", r.cfg.Workers, "interval", r.cfg.Interval)
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := r.RotateAll(ctx); err != nil {
				klog.ErrorS(err, "Container log rotation failed")
			}
		}
	}
}

// RotateAll looks once at the log of every running container, rotating
// those over MaxSize, with Workers at once.
func (r *Rotator) RotateAll(ctx context.Context) error {
	running := &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}
	containers, err := r.cfg.Runtime.ListContainers(ctx, running)
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	ids := make(chan string)
	var wg sync.WaitGroup
	for range min(r.cfg.Workers, len(containers)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range ids {
				if err := r.rotateContainer(ctx, id); err != nil {
					klog.ErrorS(err, "Failed to rotate container log", "containerID", id)
				}
			}
		}()
	}
	for _, c := range containers {
		// Only running containers write: a stopped one needs no new file.
		if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		select {
		case ids <- c.Id:
		case <-ctx.Done():
		}
	}
	close(ids)
	wg.Wait()
	return ctx.Err()
}

// rotateContainer rotates one container's log if it is over MaxSize.
func (r *Rotator) rotateContainer(ctx context.Context, id string) error {
	resp, err := r.cfg.Runtime.ContainerStatus(ctx, id, false)
	if err != nil {
		return fmt.Errorf("container status: %w", err)
	}
	path := resp.GetStatus().GetLogPath()
	if path == "" {
		return nil
	}
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		// Removed behind the runtime's back: have it make a new one.
		if err := r.cfg.Runtime.ReopenContainerLog(ctx, id); err != nil {
			return fmt.Errorf("reopen missing log %q: %w", path, err)
		}
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Size() < r.cfg.MaxSize {
		return nil
	}
	return r.rotate(ctx, id, path)
}

// rotate makes room for a new file (dropping leftovers of failed
// compressions, the oldest rotated files, and compressing the rest), then
// renames the log and has the runtime reopen it.
func (r *Rotator) rotate(ctx context.Context, id, path string) error {
	rotated, err := RotatedFiles(path)
	if err != nil {
		return err
	}
	// The new file and the one being rotated count too: keep MaxFiles-2.
	keep := r.cfg.MaxFiles - 2
	for len(rotated) > keep {
		if err := os.Remove(rotated[0]); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove old log: %w", err)
		}
		rotated = rotated[1:]
	}
	for _, f := range rotated {
		if !strings.HasSuffix(f, gzSuffix) {
			if err := compress(f); err != nil {
				return err
			}
		}
	}
	name := path + "." + r.cfg.Now().Format(rotatedTimeFormat)
	if _, err := os.Lstat(name); err == nil {
		return nil // rotated within this second already; next time
	}
	if err := os.Rename(path, name); err != nil {
		return fmt.Errorf("rename log: %w", err)
	}
	if err := r.cfg.Runtime.ReopenContainerLog(ctx, id); err != nil {
		// Put it back so the next round tries again; until then the
		// runtime writes on into the renamed file.
		if rerr := os.Rename(name, path); rerr != nil {
			klog.ErrorS(rerr, "Failed to rename a rotated log back", "path", path, "rotated", name)
		}
		return fmt.Errorf("reopen container log: %w", err)
	}
	klog.V(2).InfoS("Rotated container log", "containerID", id, "path", path, "rotated", name)
	return nil
}

// RotatedFiles lists a log's rotated files, oldest first, and removes the
// leftovers of interrupted rotations: temporary files, and uncompressed
// files whose compressed copy is complete.
func RotatedFiles(path string) ([]string, error) {
	matches, err := filepath.Glob(globEscape(path) + ".*")
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, m := range matches {
		have[m] = true
	}
	var out []string
	for _, m := range matches {
		if strings.HasSuffix(m, tmpSuffix) || have[m+gzSuffix] {
			if err := os.Remove(m); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("remove leftover log %q: %w", m, err)
			}
			continue
		}
		out = append(out, m)
	}
	sort.Strings(out) // the time in the name sorts them by age
	return out, nil
}

// compress gzips a rotated log to <log>.gz, through a temporary file so a
// crash never leaves a truncated .gz, and removes the original.
func compress(path string) error {
	in, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open log to compress: %w", err)
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	tmp := path + gzSuffix + tmpSuffix
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fi.Mode().Perm())
	if err != nil {
		return fmt.Errorf("create compressed log: %w", err)
	}
	defer os.Remove(tmp) // gone by then unless something failed
	zw := gzip.NewWriter(out)
	_, err = io.Copy(zw, in)
	if err == nil {
		err = zw.Close()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("compress log %q: %w", path, err)
	}
	if err := os.Rename(tmp, path+gzSuffix); err != nil {
		return fmt.Errorf("rename compressed log: %w", err)
	}
	return os.Remove(path)
}

// globEscape quotes the glob metacharacters of a path.
func globEscape(p string) string {
	var b strings.Builder
	for _, c := range p {
		if strings.ContainsRune(`*?[\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}
