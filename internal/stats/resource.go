package stats

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"
)

// The /metrics/resource series, named and labelled as upstream's, with
// the sample's own timestamps as metrics-server expects.
var (
	nodeCPUDesc = prometheus.NewDesc("node_cpu_usage_seconds_total",
		"Cumulative cpu time consumed by the node in core-seconds", nil, nil)
	nodeMemDesc = prometheus.NewDesc("node_memory_working_set_bytes",
		"Current working set of the node in bytes", nil, nil)
	containerCPUDesc = prometheus.NewDesc("container_cpu_usage_seconds_total",
		"Cumulative cpu time consumed by the container in core-seconds", []string{"container", "pod", "namespace"}, nil)
	containerMemDesc = prometheus.NewDesc("container_memory_working_set_bytes",
		"Current working set of the container in bytes", []string{"container", "pod", "namespace"}, nil)
	containerStartDesc = prometheus.NewDesc("container_start_time_seconds",
		"Start time of the container since unix epoch in seconds", []string{"container", "pod", "namespace"}, nil)
	podCPUDesc = prometheus.NewDesc("pod_cpu_usage_seconds_total",
		"Cumulative cpu time consumed by the pod in core-seconds", []string{"pod", "namespace"}, nil)
	podMemDesc = prometheus.NewDesc("pod_memory_working_set_bytes",
		"Current working set of the pod in bytes", []string{"pod", "namespace"}, nil)
	scrapeErrorDesc = prometheus.NewDesc("resource_scrape_error",
		"1 if there was an error while getting container metrics, 0 otherwise", nil, nil)
)

// resourceCollector reads the latest summary at each scrape.
type resourceCollector struct{ p *Provider }

// ResourceHandler serves /metrics/resource.
func (p *Provider) ResourceHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(resourceCollector{p})
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

func (c resourceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{nodeCPUDesc, nodeMemDesc, containerCPUDesc, containerMemDesc,
		containerStartDesc, podCPUDesc, podMemDesc, scrapeErrorDesc} {
		ch <- d
	}
}

func (c resourceCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := c.p.Summary(ctx, true)
	failed := 0.0
	defer func() { ch <- prometheus.MustNewConstMetric(scrapeErrorDesc, prometheus.GaugeValue, failed) }()
	if err != nil {
		klog.ErrorS(err, "Collecting resource metrics failed")
		failed = 1
		return
	}
	emit := func(d *prometheus.Desc, t prometheus.ValueType, at time.Time, v float64, labels ...string) {
		ch <- prometheus.NewMetricWithTimestamp(at, prometheus.MustNewConstMetric(d, t, v, labels...))
	}
	if cpu := s.Node.CPU; cpu != nil && cpu.UsageCoreNanoSeconds != nil {
		emit(nodeCPUDesc, prometheus.CounterValue, cpu.Time.Time, float64(*cpu.UsageCoreNanoSeconds)/1e9)
	}
	if m := s.Node.Memory; m != nil && m.WorkingSetBytes != nil {
		emit(nodeMemDesc, prometheus.GaugeValue, m.Time.Time, float64(*m.WorkingSetBytes))
	}
	for _, pod := range s.Pods {
		name, ns := pod.PodRef.Name, pod.PodRef.Namespace
		if cpu := pod.CPU; cpu != nil && cpu.UsageCoreNanoSeconds != nil {
			emit(podCPUDesc, prometheus.CounterValue, cpu.Time.Time, float64(*cpu.UsageCoreNanoSeconds)/1e9, name, ns)
		}
		if m := pod.Memory; m != nil && m.WorkingSetBytes != nil {
			emit(podMemDesc, prometheus.GaugeValue, m.Time.Time, float64(*m.WorkingSetBytes), name, ns)
		}
		for _, ctr := range pod.Containers {
			ch <- prometheus.MustNewConstMetric(containerStartDesc, prometheus.GaugeValue,
				float64(ctr.StartTime.UnixNano())/1e9, ctr.Name, name, ns)
			if cpu := ctr.CPU; cpu != nil && cpu.UsageCoreNanoSeconds != nil {
				emit(containerCPUDesc, prometheus.CounterValue, cpu.Time.Time, float64(*cpu.UsageCoreNanoSeconds)/1e9, ctr.Name, name, ns)
			}
			if m := ctr.Memory; m != nil && m.WorkingSetBytes != nil {
				emit(containerMemDesc, prometheus.GaugeValue, m.Time.Time, float64(*m.WorkingSetBytes), ctr.Name, name, ns)
			}
		}
	}
}
