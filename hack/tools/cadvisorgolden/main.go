// Command cadvisorgolden writes the /metrics/cadvisor families (name,
// type, label names, help) that the upstream kubelet v1.34 serves for a
// pod on containerd, by running cAdvisor's own Prometheus collectors with
// the kubelet's metric set and labels over one pod: its pod cgroup, its
// sandbox and one container, each with every figure set. Skiff's tests
// compare its own output with the file this writes
// (internal/stats/testdata/cadvisor_upstream.txt).
//
//	go run ./cadvisorgolden > ../../internal/stats/testdata/cadvisor_upstream.txt
package main

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/google/cadvisor/container"
	info "github.com/google/cadvisor/info/v1"
	v2 "github.com/google/cadvisor/info/v2"
	"github.com/google/cadvisor/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
)

// kubeletMetrics is the set pkg/kubelet/server enables (KubeletPSI is on
// by default in v1.34).
var kubeletMetrics = container.MetricSet{
	container.CpuUsageMetrics: {}, container.MemoryUsageMetrics: {}, container.CpuLoadMetrics: {},
	container.DiskIOMetrics: {}, container.DiskUsageMetrics: {}, container.NetworkUsageMetrics: {},
	container.AppMetrics: {}, container.ProcessMetrics: {}, container.OOMMetrics: {}, container.PressureMetrics: {},
}

// kubeletLabels are the labels pkg/kubelet/server gives every container.
func kubeletLabels(c *info.ContainerInfo) map[string]string {
	name := ""
	if len(c.Aliases) > 0 {
		name = c.Aliases[0]
	}
	return map[string]string{
		metrics.LabelID: c.Name, metrics.LabelName: name, metrics.LabelImage: c.Spec.Image,
		"pod": c.Spec.Labels["io.kubernetes.pod.name"], "namespace": c.Spec.Labels["io.kubernetes.pod.namespace"],
		"container": c.Spec.Labels["io.kubernetes.container.name"],
	}
}

type provider struct {
	containers map[string]*info.ContainerInfo
}

func (p provider) GetRequestedContainersInfo(string, v2.RequestOptions) (map[string]*info.ContainerInfo, error) {
	return p.containers, nil
}

func (provider) GetVersionInfo() (*info.VersionInfo, error) {
	return &info.VersionInfo{KernelVersion: "6.1.0", ContainerOsVersion: "Debian GNU/Linux 12 (bookworm)"}, nil
}

func (provider) GetMachineInfo() (*info.MachineInfo, error) {
	return &info.MachineInfo{Timestamp: time.Now(), NumCores: 2, NumPhysicalCores: 2, NumSockets: 1,
		MemoryCapacity: 8 << 30, SwapCapacity: 1 << 30, MachineID: "m", SystemUUID: "u", BootID: "b"}, nil
}

// cgroup is one cgroup as cAdvisor's containerd (pid > 0) or raw handler
// reports it, with every figure non-zero.
func cgroup(name string, aliases []string, image string, labels map[string]string, network, rootPid bool) *info.ContainerInfo {
	spec := info.ContainerSpec{HasCpu: true, HasMemory: true, HasProcesses: true, HasDiskIo: true, HasNetwork: network,
		Cpu: info.CpuSpec{Limit: 102, Quota: 50000, Period: 100000}, Memory: info.MemorySpec{Limit: 1 << 20},
		Image: image, Labels: labels, CreationTime: time.Now()}
	disk := []info.PerDiskStats{{Device: "/dev/sda", Major: 8, Stats: map[string]uint64{"Read": 1, "Write": 2}}}
	st := &info.ContainerStats{Timestamp: time.Now(),
		Cpu:       info.CpuStats{Usage: info.CpuUsage{Total: 3, User: 2, System: 1}, CFS: info.CpuCFS{Periods: 1}},
		Memory:    info.MemoryStats{Usage: 5, WorkingSet: 4},
		DiskIo:    info.DiskIoStats{IoServiceBytes: disk, IoServiced: disk},
		Processes: info.ProcessStats{ProcessCount: 1, FdCount: 3, ThreadsCurrent: 1},
	}
	if network {
		st.Network.Interfaces = []info.InterfaceStats{{Name: "eth0", RxBytes: 1}}
	}
	if rootPid {
		st.Processes.Ulimits = []info.UlimitSpec{{Name: "max_open_files", SoftLimit: 1024, HardLimit: 4096}}
	}
	return &info.ContainerInfo{ContainerReference: info.ContainerReference{Name: name, Aliases: aliases},
		Spec: spec, Stats: []*info.ContainerStats{st}}
}

func main() {
	pod := map[string]string{"io.kubernetes.pod.name": "p", "io.kubernetes.pod.namespace": "ns"}
	ctr := map[string]string{"io.kubernetes.container.name": "c"}
	for k, v := range pod {
		ctr[k] = v
	}
	p := provider{containers: map[string]*info.ContainerInfo{
		"pod": cgroup("/kubepods/burstable/podu", nil, "", pod, false, false),
		"sb":  cgroup("/kubepods/burstable/podu/sb", []string{"sb", "/kubepods/burstable/podu/sb"}, "pause", pod, true, true),
		"c":   cgroup("/kubepods/burstable/podu/c", []string{"c", "/kubepods/burstable/podu/c"}, "busybox", ctr, false, true),
	}}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewPrometheusMachineCollector(p, kubeletMetrics))
	reg.MustRegister(metrics.NewPrometheusCollector(p, kubeletLabels, kubeletMetrics, clock.RealClock{},
		v2.RequestOptions{IdType: v2.TypeName, Count: 1, Recursive: true}))
	mfs, err := reg.Gather()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, mf := range mfs {
		labels := map[string]bool{}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = true
			}
		}
		names := make([]string, 0, len(labels))
		for l := range labels {
			names = append(names, l)
		}
		sort.Strings(names)
		fmt.Printf("%s\t%s\t%s\t%s\n", mf.GetName(), strings.ToLower(mf.GetType().String()), strings.Join(names, ","), mf.GetHelp())
	}
}
