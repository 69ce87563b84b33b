//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/utils/ptr"
)

// TestCSIVolumeStatsInSummaryAndMetrics: the hostpath driver (which has
// GET_VOLUME_STATS and VOLUME_CONDITION) keeps its volumes on a 64 MiB
// tmpfs of their own, so what its NodeGetVolumeStats says of a volume's
// filesystem is that volume's. A pod writes 8 MiB into a CSI PV; within
// a few volume sampling periods (2 s here) /stats/summary shows the
// pod's volume "data" with its claim, the tmpfs's capacity, at least the
// 8 MiB used, and the condition the driver gave, and /metrics the
// claim's kubelet_volume_stats_* series with the same figures.
func TestCSIVolumeStatsInSummaryAndMetrics(t *testing.T) {
	const capacity, written = 64 << 20, 8 << 20
	n := csiNodeWith(t, "volumeStatsAggPeriod: 2s\n", storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)}, "64m")
	n.csiPV(t, "data", "")
	p := claimPod("writer", "data", false, "dd if=/dev/zero of=/data/f bs=1M count=8 && sync && "+sleeper)
	p.Spec.RestartPolicy = v1.RestartPolicyAlways
	n.createPod(t, p)
	n.waitPod(t, n.ns, "writer", 60*time.Second, "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })

	var abnormal bool
	waitFor(t, 60*time.Second, "the CSI volume's stats in /stats/summary", func() (bool, error) {
		s, err := getSummary(n.url("/stats/summary"))
		if err != nil {
			return false, nil
		}
		ps := podStats(s, "writer")
		if ps == nil {
			return false, nil
		}
		for _, v := range ps.VolumeStats {
			if v.Name != "data" {
				continue
			}
			if v.PVCRef == nil || v.PVCRef.Name != "data" || v.PVCRef.Namespace != n.ns {
				return false, fmt.Errorf("volume data has claim %+v", v.PVCRef)
			}
			if v.VolumeHealthStats == nil {
				return false, fmt.Errorf("volume data has no health, though the driver has VOLUME_CONDITION")
			}
			abnormal = v.VolumeHealthStats.Abnormal
			t.Logf("summary: capacity %d used %d inodes used %d", val(v.CapacityBytes), val(v.UsedBytes), val(v.InodesUsed))
			return val(v.CapacityBytes) == capacity && val(v.UsedBytes) >= written && val(v.UsedBytes) < capacity, nil
		}
		return false, nil
	})
	// The condition is the driver's: the hostpath driver finds its own
	// mount by path, which a bind mount from a tmpfs of its own does not
	// show, and may say the volume is not mounted. Skiff relays it.
	if said := n.driverSaysAbnormal(t); said != abnormal {
		t.Errorf("the summary's condition is abnormal=%v, the driver's last answer abnormal=%v", abnormal, said)
	}
	wantAbnormal := 0.0
	if abnormal {
		wantAbnormal = 1
	}
	waitFor(t, 30*time.Second, "the claim's kubelet_volume_stats_* in /metrics", func() (bool, error) {
		mfs, err := scrape(n.url("/metrics"))
		if err != nil {
			return false, nil
		}
		got := map[string]float64{}
		for _, name := range []string{"capacity_bytes", "used_bytes", "available_bytes", "inodes", "inodes_used", "inodes_free", "health_status_abnormal"} {
			mf := mfs["kubelet_volume_stats_"+name]
			if mf == nil {
				return false, nil
			}
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["namespace"] == n.ns && labels["persistentvolumeclaim"] == "data" {
					got[name] = m.GetGauge().GetValue()
				}
			}
		}
		t.Logf("metrics: %v", got)
		return got["capacity_bytes"] == capacity && got["used_bytes"] >= written &&
			got["used_bytes"]+got["available_bytes"] <= capacity && got["inodes_used"] >= 1 &&
			got["inodes"] > 0 && len(got) == 7 && got["health_status_abnormal"] == wantAbnormal, nil
	})
}

// driverSaysAbnormal reads the driver's last NodeGetVolumeStats answer
// from its log: whether it said the volume's condition is abnormal.
func (n *csiNode) driverSaysAbnormal(t *testing.T) bool {
	t.Helper()
	b, err := os.ReadFile(n.driverLog)
	must(t, err)
	last := ""
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, `"Method":"/csi.v1.Node/NodeGetVolumeStats"`) {
			last = l
		}
	}
	if last == "" {
		t.Fatal("the driver logged no NodeGetVolumeStats")
	}
	return strings.Contains(last, `"abnormal":true`)
}
