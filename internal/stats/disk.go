package stats

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

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
			dir := filepath.Join(p.cfg.RootDir, "pods", pod.Name(), "volumes", plugin.Name())
			vols, _ := os.ReadDir(dir)
			for _, v := range vols {
				if vs, ok := p.volumeStats(ctx, filepath.Join(dir, v.Name()), v.Name(), start); ok {
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
				u, ok := p.measure(ctx, filepath.Join(p.cfg.PodLogsDir, dir.Name(), c.Name()))
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

func (p *Provider) volumeStats(ctx context.Context, dir, name string, t time.Time) (statsapi.VolumeStats, bool) {
	u, ok := p.measure(ctx, dir)
	if !ok {
		return statsapi.VolumeStats{}, false
	}
	info, err := statfs(dir)
	if err != nil {
		return statsapi.VolumeStats{}, false
	}
	return statsapi.VolumeStats{Name: name, FsStats: *info.fsStats(t, ptr(u.Bytes), ptr(u.Inodes))}, true
}

// measure walks dir, for one VolumePeriod at most. A walk that cannot
// finish is logged and its tree left out: part of a tree is not its size.
func (p *Provider) measure(ctx context.Context, dir string) (du.Usage, bool) {
	walkCtx, cancel := context.WithTimeout(ctx, p.cfg.VolumePeriod)
	defer cancel()
	u, err := du.Dir(walkCtx, dir)
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, fs.ErrNotExist) {
			klog.ErrorS(err, "Cannot measure disk usage", "path", dir, "counted", u.Bytes)
		}
		return du.Usage{}, false
	}
	return u, true
}
