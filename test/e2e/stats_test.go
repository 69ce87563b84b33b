//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// busyScript holds ~32 MiB in a shell variable, writes 5 MiB into an
// emptyDir, then burns CPU.
const busyScript = `x=$(head -c 33554432 /dev/zero | tr '\0' a); dd if=/dev/zero of=/data/f bs=1M count=5; while :; do :; done`

const busyVolume = `  volumes:
  - name: data
    emptyDir: {}
`

func busyPodManifest(name string) string {
	return staticPod(name, busyScript, busyVolume) + `    volumeMounts:
    - name: data
      mountPath: /data
`
}

// getSummary fetches /stats/summary (with a query, e.g. "?only_cpu_and_memory=true").
func getSummary(url string) (*statsapi.Summary, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	var s statsapi.Summary
	return &s, json.NewDecoder(resp.Body).Decode(&s)
}

func podStats(s *statsapi.Summary, name string) *statsapi.PodStats {
	for i := range s.Pods {
		if s.Pods[i].PodRef.Name == name {
			return &s.Pods[i]
		}
	}
	return nil
}

func val(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}

// /stats/summary and /metrics/resource on the read-only port
// give sane, non-zero figures for a busy pod, clearly above an idle one's.
func TestStatsSummaryBusyPod(t *testing.T) {
	n := newPrivateNode(t)
	f, err := os.OpenFile(n.config, os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteString("volumeStatsAggPeriod: 3s\n")
	must(t, err)
	f.Close()
	n.start()
	busy, idle := "busy-"+nodeName, "idle-"+nodeName
	n.writeManifest("busy.yaml", busyPodManifest("busy"))
	n.writeManifest("idle.yaml", staticPod("idle", "sleep 3600", ""))
	n.waitRunning(busy, 60*time.Second)
	n.waitRunning(idle, 60*time.Second)

	// CPU rates need two samples (10 s apart) after the pods started, and
	// the volume walk must have seen the 5 MiB file.
	var s *statsapi.Summary
	waitFor(t, 60*time.Second, "rates and volume stats for both pods", func() (bool, error) {
		var err error
		if s, err = getSummary(n.url("/stats/summary")); err != nil {
			return false, err
		}
		b, i := podStats(s, busy), podStats(s, idle)
		if b == nil || i == nil || b.CPU.UsageNanoCores == nil || i.CPU.UsageNanoCores == nil ||
			len(b.Containers) != 1 || b.Containers[0].CPU.UsageNanoCores == nil || len(b.VolumeStats) == 0 {
			return false, nil
		}
		return val(b.VolumeStats[0].UsedBytes) >= 5<<20, nil
	})
	b, i := podStats(s, busy), podStats(s, idle)
	node := s.Node
	t.Logf("node cpu %dn mem ws %d; busy cpu %dn ws %d; idle cpu %dn ws %d", val(node.CPU.UsageNanoCores),
		val(node.Memory.WorkingSetBytes), val(b.CPU.UsageNanoCores), val(b.Memory.WorkingSetBytes),
		val(i.CPU.UsageNanoCores), val(i.Memory.WorkingSetBytes))

	if node.NodeName != nodeName || val(node.CPU.UsageNanoCores) == 0 || val(node.CPU.UsageCoreNanoSeconds) == 0 ||
		val(node.Memory.WorkingSetBytes) == 0 || val(node.Memory.UsageBytes) == 0 || val(node.Memory.AvailableBytes) == 0 {
		t.Errorf("node cpu/memory not filled: %+v %+v", node.CPU, node.Memory)
	}
	if node.Fs == nil || val(node.Fs.CapacityBytes) == 0 || val(node.Fs.UsedBytes) == 0 {
		t.Errorf("node fs: %+v", node.Fs)
	}
	if node.Runtime == nil || node.Runtime.ImageFs == nil || val(node.Runtime.ImageFs.UsedBytes) == 0 ||
		val(node.Runtime.ImageFs.CapacityBytes) == 0 {
		t.Errorf("runtime imageFs: %+v", node.Runtime)
	}
	if node.Rlimit == nil || node.Rlimit.MaxPID == nil || node.Rlimit.NumOfRunningProcesses == nil || *node.Rlimit.NumOfRunningProcesses < 10 {
		t.Errorf("rlimit: %+v", node.Rlimit)
	}
	if node.Network == nil || len(node.Network.Interfaces) == 0 || val(node.Network.RxBytes) == 0 {
		t.Errorf("node network: %+v", node.Network)
	}

	// The busy pod burns a good part of a core; the idle one nearly nothing.
	if bc, ic := val(b.CPU.UsageNanoCores), val(i.CPU.UsageNanoCores); bc < 200_000_000 || bc < 10*ic+100_000_000 {
		t.Errorf("busy pod CPU %d nanocores is not clearly above the idle pod's %d", bc, ic)
	}
	if ws := val(b.Memory.WorkingSetBytes); ws < 30<<20 || ws > 1<<30 {
		t.Errorf("busy pod working set %d bytes, want the ~32 MiB it holds", ws)
	}
	if ws := val(i.Memory.WorkingSetBytes); ws == 0 || ws > 20<<20 {
		t.Errorf("idle pod working set %d bytes, want small but non-zero", ws)
	}
	c := b.Containers[0]
	if c.Name != "main" || val(c.CPU.UsageNanoCores) < 200_000_000 || val(c.Memory.WorkingSetBytes) < 30<<20 {
		t.Errorf("busy container: %s cpu %+v mem %+v", c.Name, c.CPU, c.Memory)
	}
	if c.Rootfs == nil || val(c.Rootfs.CapacityBytes) == 0 || c.Rootfs.UsedBytes == nil {
		t.Errorf("busy container rootfs: %+v", c.Rootfs)
	}
	if c.Logs == nil || c.Logs.UsedBytes == nil || val(c.Logs.CapacityBytes) == 0 {
		t.Errorf("busy container logs: %+v", c.Logs)
	}
	if v := b.VolumeStats[0]; v.Name != "data" || val(v.CapacityBytes) == 0 {
		t.Errorf("volume stats: %+v", b.VolumeStats)
	}
	if b.EphemeralStorage == nil || val(b.EphemeralStorage.UsedBytes) < 5<<20 {
		t.Errorf("ephemeral storage: %+v", b.EphemeralStorage)
	}
	if b.Network == nil || b.Network.Name != "eth0" || b.Network.RxBytes == nil {
		t.Errorf("pod network: %+v", b.Network)
	}

	// only_cpu_and_memory leaves the rest out.
	only, err := getSummary(n.url("/stats/summary?only_cpu_and_memory=true"))
	must(t, err)
	if ob := podStats(only, busy); ob == nil || ob.CPU == nil || ob.Memory == nil || ob.VolumeStats != nil ||
		ob.Network != nil || only.Node.Fs != nil || only.Node.CPU == nil {
		t.Errorf("only_cpu_and_memory summary has more or less than CPU and memory: %+v", only.Node)
	}
	if resp, err := http.Get(n.url("/stats/summary?only_cpu_and_memory=maybe")); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a bad only_cpu_and_memory must be a 400: %v %v", resp, err)
	}

	// /metrics/resource has the same figures for metrics-server.
	mfs, err := scrape(n.url("/metrics/resource"))
	must(t, err)
	busyLabels := map[string]string{"pod": busy, "namespace": "default"}
	for _, c := range []struct {
		name   string
		labels map[string]string
		min    float64
	}{
		{"node_cpu_usage_seconds_total", nil, 0.001},
		{"node_memory_working_set_bytes", nil, 1 << 20},
		{"pod_cpu_usage_seconds_total", busyLabels, 1},
		{"pod_memory_working_set_bytes", busyLabels, 30 << 20},
		{"container_cpu_usage_seconds_total", map[string]string{"container": "main", "pod": busy}, 1},
		{"container_memory_working_set_bytes", map[string]string{"container": "main", "pod": busy}, 30 << 20},
		{"container_start_time_seconds", map[string]string{"container": "main", "pod": idle}, 1.7e9},
	} {
		if v := gauge(mfs, c.name, c.labels); v < c.min {
			t.Errorf("%s%v = %v, want at least %v", c.name, c.labels, v, c.min)
		}
	}
	if _, ok := mfs["resource_scrape_error"]; !ok || gauge(mfs, "resource_scrape_error", nil) != 0 {
		t.Errorf("resource_scrape_error missing or not 0")
	}
}
