package stats

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/skiff-sh/skiff/internal/volume/csi"
)

// fakeCSI answers NodeGetVolumeStats by target, or that the driver does
// not report stats.
type fakeCSI map[string]csi.VolumeStats

func (f fakeCSI) VolumeStats(_ context.Context, target string) (csi.VolumeStats, error) {
	s, ok := f[target]
	if !ok {
		return csi.VolumeStats{}, fmt.Errorf("driver x: %w", csi.ErrNoVolumeStats)
	}
	return s, nil
}

// CSI volumes are measured by their drivers, not walked: a pod's CSI
// volume shows the driver's figures under the pod's name for it, with
// its claim; a volume whose driver reports no stats is left out; neither
// counts in the pod's ephemeral storage; /metrics gives the claim's
// kubelet_volume_stats_* series.
func TestCSIVolumeStatsFromTheDriver(t *testing.T) {
	f := newFixture(t)
	root := f.p.cfg.RootDir
	csiDir := filepath.Join(root, "pods/u1/volumes/kubernetes.io~csi")
	// What a driver mounted: a walk would count it.
	write(t, root, "pods/u1/volumes/kubernetes.io~csi/pv-a/mount/big", strings.Repeat("x", 1<<20))
	write(t, root, "pods/u1/volumes/kubernetes.io~csi/pv-b/mount/big", strings.Repeat("x", 1<<20))
	abnormal := true
	targetA, targetB := filepath.Join(csiDir, "pv-a/mount"), filepath.Join(csiDir, "pv-b/mount")
	f.p.cfg.CSI = fakeCSI{targetA: {CapacityBytes: 1000, AvailableBytes: 700, UsedBytes: 300, Inodes: 50, InodesFree: 40, InodesUsed: 10,
		Abnormal: &abnormal, Message: "disk on fire"}}
	f.p.cfg.PodVolumes = func(uid types.UID) map[string]VolumeRef {
		if uid != "u1" {
			return nil
		}
		return map[string]VolumeRef{
			targetA: {Name: "db", ClaimNamespace: "default", ClaimName: "data-db-0"},
			targetB: {Name: "nostats", ClaimNamespace: "default", ClaimName: "other"},
			filepath.Join(root, "pods/u1/volumes/kubernetes.io~empty-dir/data"): {Name: "data"},
		}
	}
	f.sampleTwice(t)
	s, err := f.p.Summary(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	p := s.Pods[0]
	byName := map[string]statsapi.VolumeStats{}
	for _, v := range p.VolumeStats {
		byName[v.Name] = v
	}
	if len(byName) != 2 {
		t.Fatalf("volumes %+v, want data and db", p.VolumeStats)
	}
	db := byName["db"]
	eq(t, "db used", db.UsedBytes, 300)
	eq(t, "db capacity", db.CapacityBytes, 1000)
	eq(t, "db inodesFree", db.InodesFree, 40)
	if db.PVCRef == nil || *db.PVCRef != (statsapi.PVCReference{Name: "data-db-0", Namespace: "default"}) {
		t.Errorf("db claim %+v", db.PVCRef)
	}
	if db.VolumeHealthStats == nil || !db.VolumeHealthStats.Abnormal {
		t.Errorf("db health %+v", db.VolumeHealthStats)
	}
	c := p.Containers[0]
	if want := 4096 + deref(c.Logs.UsedBytes) + deref(byName["data"].UsedBytes); deref(p.EphemeralStorage.UsedBytes) != want {
		t.Errorf("ephemeral storage %d, want rootfs+logs+emptyDir %d", deref(p.EphemeralStorage.UsedBytes), want)
	}

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(f.p.VolumeStatsCollector())
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, fam := range families {
		for _, m := range fam.GetMetric() {
			labels := ""
			for _, l := range m.GetLabel() {
				labels += l.GetName() + "=" + l.GetValue() + ","
			}
			got[fam.GetName()] += fmt.Sprintf("{%s} %v", labels, m.GetGauge().GetValue())
		}
	}
	const claim = "{namespace=default,persistentvolumeclaim=data-db-0,} "
	wantSeries := map[string]string{
		"kubelet_volume_stats_capacity_bytes": claim + "1000", "kubelet_volume_stats_available_bytes": claim + "700",
		"kubelet_volume_stats_used_bytes": claim + "300", "kubelet_volume_stats_inodes": claim + "50",
		"kubelet_volume_stats_inodes_free": claim + "40", "kubelet_volume_stats_inodes_used": claim + "10",
		"kubelet_volume_stats_health_status_abnormal": claim + "1",
	}
	if fmt.Sprint(got) != fmt.Sprint(wantSeries) {
		t.Errorf("metrics\n%v\nwant\n%v", got, wantSeries)
	}
}

// A symlink among a pod's plugin directories (a driver can plant one) is
// not followed: what it points to is not measured as the pod's volumes.
func TestVolumeWalkSkipsASymlinkedPluginDirectory(t *testing.T) {
	f := newFixture(t)
	host := t.TempDir()
	write(t, host, "vol/big", strings.Repeat("x", 1<<20))
	if err := os.Symlink(host, filepath.Join(f.p.cfg.RootDir, "pods/u1/volumes/kubernetes.io~host")); err != nil {
		t.Fatal(err)
	}
	f.sampleTwice(t)
	s, err := f.p.Summary(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	if v := s.Pods[0].VolumeStats; len(v) != 1 || v[0].Name != "data" {
		t.Errorf("volumes %+v, want the emptyDir data only", v)
	}
}
