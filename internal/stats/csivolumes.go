package stats

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/skiff-sh/skiff/internal/volume/csi"
)

// csiPluginDir holds a pod's CSI volumes. Skiff does not walk them: their
// usage is the driver's to tell (NodeGetVolumeStats), as upstream's, and
// what a driver mounts there is no part of the pod's ephemeral storage.
const csiPluginDir = "kubernetes.io~csi"

// CSIStats asks CSI drivers for the usage of a published volume
// (*csi.Drivers); csi.ErrNoVolumeStats when the driver does not tell.
type CSIStats interface {
	VolumeStats(ctx context.Context, target string) (csi.VolumeStats, error)
}

// VolumeRef names a volume set up for a pod as the summary gives it: the
// pod's name for the volume, and the claim it comes from, if any.
type VolumeRef struct {
	Name string
	// ClaimNamespace and ClaimName are empty for a volume of no claim.
	ClaimNamespace, ClaimName string
}

// csiVolumeStats asks the drivers for the pod's CSI volumes' usage: the
// ones PodVolumes knows of (a pod's volumes by host path), so each is
// named as the pod names it and carries its claim. A driver that does
// not report stats leaves its volumes out, as upstream.
func (p *Provider) csiVolumeStats(ctx context.Context, uid types.UID, t time.Time) []statsapi.VolumeStats {
	if p.cfg.CSI == nil || p.cfg.PodVolumes == nil {
		return nil
	}
	prefix := filepath.Join(p.cfg.RootDir, "pods", string(uid), "volumes", csiPluginDir) + "/"
	var out []statsapi.VolumeStats
	for hostPath, ref := range p.cfg.PodVolumes(uid) {
		if !strings.HasPrefix(hostPath, prefix) {
			continue
		}
		callCtx, cancel := context.WithTimeout(ctx, p.cfg.VolumePeriod)
		s, err := p.cfg.CSI.VolumeStats(callCtx, hostPath)
		cancel()
		if err != nil {
			if !errors.Is(err, csi.ErrNoVolumeStats) && ctx.Err() == nil {
				klog.V(4).InfoS("Cannot get a CSI volume's stats", "podUID", uid, "volume", ref.Name, "err", err)
			}
			continue
		}
		out = append(out, csiStats(ref, s, t))
	}
	return out
}

func csiStats(ref VolumeRef, s csi.VolumeStats, t time.Time) statsapi.VolumeStats {
	vs := statsapi.VolumeStats{Name: ref.Name, FsStats: statsapi.FsStats{
		Time: metaTime(t), CapacityBytes: ptr(s.CapacityBytes), AvailableBytes: ptr(s.AvailableBytes), UsedBytes: ptr(s.UsedBytes),
		Inodes: ptr(s.Inodes), InodesFree: ptr(s.InodesFree), InodesUsed: ptr(s.InodesUsed),
	}}
	if ref.ClaimName != "" {
		vs.PVCRef = &statsapi.PVCReference{Name: ref.ClaimName, Namespace: ref.ClaimNamespace}
	}
	if s.Abnormal != nil {
		vs.VolumeHealthStats = &statsapi.VolumeHealthStats{Abnormal: *s.Abnormal}
	}
	return vs
}

// The kubelet_volume_stats_* gauges, upstream's names, help and labels:
// one series per claim in use on the node.
var (
	volumeLabels         = []string{"namespace", "persistentvolumeclaim"}
	volumeCapacityDesc   = prometheus.NewDesc("kubelet_volume_stats_capacity_bytes", "Capacity in bytes of the volume", volumeLabels, nil)
	volumeAvailableDesc  = prometheus.NewDesc("kubelet_volume_stats_available_bytes", "Number of available bytes in the volume", volumeLabels, nil)
	volumeUsedDesc       = prometheus.NewDesc("kubelet_volume_stats_used_bytes", "Number of used bytes in the volume", volumeLabels, nil)
	volumeInodesDesc     = prometheus.NewDesc("kubelet_volume_stats_inodes", "Maximum number of inodes in the volume", volumeLabels, nil)
	volumeInodesFreeDesc = prometheus.NewDesc("kubelet_volume_stats_inodes_free", "Number of free inodes in the volume", volumeLabels, nil)
	volumeInodesUsedDesc = prometheus.NewDesc("kubelet_volume_stats_inodes_used", "Number of used inodes in the volume", volumeLabels, nil)
	volumeAbnormalDesc   = prometheus.NewDesc("kubelet_volume_stats_health_status_abnormal",
		"Abnormal volume health status. The count is either 1 or 0. 1 indicates the volume is unhealthy, 0 indicates volume is healthy",
		volumeLabels, nil)
)

// volumeStatsCollector serves the claims' stats of the last volume walk.
type volumeStatsCollector struct{ p *Provider }

// VolumeStatsCollector is the kubelet_volume_stats_* collector, for
// /metrics.
func (p *Provider) VolumeStatsCollector() prometheus.Collector { return volumeStatsCollector{p} }

func (c volumeStatsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{volumeCapacityDesc, volumeAvailableDesc, volumeUsedDesc,
		volumeInodesDesc, volumeInodesFreeDesc, volumeInodesUsedDesc, volumeAbnormalDesc} {
		ch <- d
	}
}

func (c volumeStatsCollector) Collect(ch chan<- prometheus.Metric) {
	c.p.mu.RLock()
	d := c.p.disk
	c.p.mu.RUnlock()
	if d == nil {
		return
	}
	seen := map[statsapi.PVCReference]bool{}
	for _, vols := range d.persistent {
		for _, v := range vols {
			if v.PVCRef == nil || seen[*v.PVCRef] {
				continue
			}
			seen[*v.PVCRef] = true
			gauge := func(desc *prometheus.Desc, val uint64) {
				ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(val), v.PVCRef.Namespace, v.PVCRef.Name)
			}
			gauge(volumeCapacityDesc, deref(v.CapacityBytes))
			gauge(volumeAvailableDesc, deref(v.AvailableBytes))
			gauge(volumeUsedDesc, deref(v.UsedBytes))
			gauge(volumeInodesDesc, deref(v.Inodes))
			gauge(volumeInodesFreeDesc, deref(v.InodesFree))
			gauge(volumeInodesUsedDesc, deref(v.InodesUsed))
			if h := v.VolumeHealthStats; h != nil {
				abnormal := uint64(0)
				if h.Abnormal {
					abnormal = 1
				}
				gauge(volumeAbnormalDesc, abnormal)
			}
		}
	}
}
