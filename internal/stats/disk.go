package stats

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/skiff-sh/skiff/internal/du"
)

// diskUsage is one walk of the pods' volumes and logs.
type diskUsage struct {
	t       time.Time
	volumes map[types.UID][]statsapi.VolumeStats
	// persistent are the volumes the drivers measure (CSI): no part of
	// the pods' ephemeral storage.
	persistent map[types.UID][]statsapi.VolumeStats
	logs       map[types.UID]map[string]du.Usage // by container name
}

// walkDisk measures every pod's volumes (<root>/pods/<uid>/volumes/<plugin>/<name>)
// and container logs (<logs>/<ns>_<name>_<uid>/<container>/).
func (p *Provider) walkDisk(ctx context.Context) {
	start := p.now()
	d := &diskUsage{t: start, volumes: map[types.UID][]statsapi.VolumeStats{}, logs: map[types.UID]map[string]du.Usage{},
		persistent: map[types.UID][]statsapi.VolumeStats{}}
	pods, _ := os.ReadDir(filepath.Join(p.cfg.RootDir, "pods"))
	for _, pod := range pods {
		if ctx.Err() != nil {
			return
		}
		uid := types.UID(pod.Name())
		plugins, _ := os.ReadDir(filepath.Join(p.cfg.RootDir, "pods", pod.Name(), "volumes"))
		for _, plugin := range plugins {
			// A driver can plant a symlink among the plugin directories:
			// it is not followed.
			if plugin.Name() == csiPluginDir || !plugin.IsDir() {
				continue
			}
			rel := filepath.Join("pods", pod.Name(), "volumes", plugin.Name())
			vols, _ := os.ReadDir(filepath.Join(p.cfg.RootDir, rel))
			for _, v := range vols {
				if vs, ok := p.volumeStats(ctx, filepath.Join(rel, v.Name()), v.Name(), start); ok {
					d.volumes[uid] = append(d.volumes[uid], vs)
				}
			}
		}
		if vs := p.csiVolumeStats(ctx, uid, start); len(vs) > 0 {
			d.persistent[uid] = vs
		}
	}
	if p.cfg.PodLogsDir != "" {
		dirs, _ := os.ReadDir(p.cfg.PodLogsDir)
		for _, dir := range dirs {
			parts := strings.Split(dir.Name(), "_")
			if len(parts) != 3 || ctx.Err() != nil {
				continue
			}
			uid := types.UID(parts[2])
			containers, _ := os.ReadDir(filepath.Join(p.cfg.PodLogsDir, dir.Name()))
			for _, c := range containers {
				u, ok := p.measure(ctx, p.cfg.PodLogsDir, filepath.Join(dir.Name(), c.Name()))
				if !ok {
					continue
				}
				if d.logs[uid] == nil {
					d.logs[uid] = map[string]du.Usage{}
				}
				d.logs[uid][c.Name()] = u
			}
		}
	}
	klog.V(4).InfoS("Measured pod volumes and logs", "took", p.now().Sub(start))
	p.mu.Lock()
	p.disk = d
	p.mu.Unlock()
}

// volumeStats measures the volume at rel below the root directory; a
// driver that sees <root>/pods may swap a directory on the way for a
// symlink, so nothing below the root is resolved by path.
func (p *Provider) volumeStats(ctx context.Context, rel, name string, t time.Time) (statsapi.VolumeStats, bool) {
	fd, err := du.OpenBeneath(p.cfg.RootDir, rel)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			klog.ErrorS(err, "Cannot measure disk usage", "path", filepath.Join(p.cfg.RootDir, rel))
		}
		return statsapi.VolumeStats{}, false
	}
	defer unix.Close(fd)
	u, ok := p.measureFD(ctx, fd, filepath.Join(p.cfg.RootDir, rel))
	if !ok {
		return statsapi.VolumeStats{}, false
	}
	info, err := fstatfs(fd)
	if err != nil {
		return statsapi.VolumeStats{}, false
	}
	return statsapi.VolumeStats{Name: name, FsStats: *info.fsStats(t, ptr(u.Bytes), ptr(u.Inodes))}, true
}

// measure walks base/rel (opened as du.OpenBeneath does), for one
// VolumePeriod at most. A walk that cannot finish is logged and its tree
// left out: part of a tree is not its size.
func (p *Provider) measure(ctx context.Context, base, rel string) (du.Usage, bool) {
	fd, err := du.OpenBeneath(base, rel)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			klog.ErrorS(err, "Cannot measure disk usage", "path", filepath.Join(base, rel))
		}
		return du.Usage{}, false
	}
	defer unix.Close(fd)
	return p.measureFD(ctx, fd, filepath.Join(base, rel))
}

// measureFD is measure of a directory already open.
func (p *Provider) measureFD(ctx context.Context, fd int, path string) (du.Usage, bool) {
	walkCtx, cancel := context.WithTimeout(ctx, p.cfg.VolumePeriod)
	defer cancel()
	u, err := du.DirFD(walkCtx, fd)
	if err != nil {
		if ctx.Err() == nil {
			klog.ErrorS(err, "Cannot measure disk usage", "path", path, "counted", u.Bytes)
		}
		return du.Usage{}, false
	}
	return u, true
}
