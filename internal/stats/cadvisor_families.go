package stats

import (
	"sort"
	"strconv"
	"time"
)

// cfamily is one container_* family of cAdvisor's collector as the
// upstream kubelet enables it (CPU, memory, CPU load, disk I/O, network,
// process, OOM and pressure metrics): its name, help and type as cAdvisor
// writes them, and the series it writes for an entity.
type cfamily struct {
	name, help, typ string
	// spec families carry no timestamp, as cAdvisor's spec series.
	spec bool
	each func(e *cadvisorEntity, w *textWriter, d *deviceNames)
}

const (
	counter = "counter"
	gauge   = "gauge"
)

// one is a family with a single series per entity.
func one(name, help, typ string, v func(e *cadvisorEntity) float64) cfamily {
	return cfamily{name: name, help: help, typ: typ,
		each: func(e *cadvisorEntity, w *textWriter, _ *deviceNames) { w.series("", v(e)) }}
}

// throttling is a CFS family: only for a cgroup with a CPU quota.
func throttling(name, help string, v func(e *cadvisorEntity) float64) cfamily {
	return cfamily{name: name, help: help, typ: counter, each: func(e *cadvisorEntity, w *textWriter, _ *deviceNames) {
		if e.cg.quota != 0 {
			w.series("", v(e))
		}
	}}
}

func spec(name, help string, v func(e *cadvisorEntity) float64) cfamily {
	f := one(name, help, gauge, v)
	f.spec = true
	return f
}

// specMemory shows "no limit" (v1's huge number, v2's "max") as 0.
func specMemory(v uint64) float64 {
	if v > 1<<62 {
		return 0
	}
	return float64(v)
}

func netFamily(name, help string, v func(n *netCounters) uint64) cfamily {
	return cfamily{name: name, help: help, typ: counter, each: func(e *cadvisorEntity, w *textWriter, _ *deviceNames) {
		for i := range e.net {
			w.series(`,interface="`+escape(e.net[i].name)+`"`, float64(v(&e.net[i])))
		}
	}}
}

// diskFamily writes a device's bytes or operations of one kind.
func diskFamily(name, help string, bytes bool, kind string) cfamily {
	return cfamily{name: name, help: help, typ: counter, each: func(e *cadvisorEntity, w *textWriter, d *deviceNames) {
		for _, io := range e.cg.disk {
			m := io.ios
			if bytes {
				m = io.bytes
			}
			w.series(`,device="`+escape(d.name(io.major, io.minor))+`"`, float64(m[kind]))
		}
	}}
}

func pressure(name, help string, res, full int) cfamily {
	return one(name, help, counter, func(e *cadvisorEntity) float64 { return float64(e.cg.psi[res][full]) / 1e6 })
}

func seconds(ns uint64) float64 { return float64(ns) / float64(time.Second) }

var containerFamilies = func() []cfamily {
	fs := []cfamily{
		{name: "container_blkio_device_usage_total", help: "Blkio Device bytes usage", typ: counter, each: blkioUsage},
		throttling("container_cpu_cfs_periods_total", "Number of elapsed enforcement period intervals.", func(e *cadvisorEntity) float64 { return float64(e.cg.periods) }),
		throttling("container_cpu_cfs_throttled_periods_total", "Number of throttled period intervals.", func(e *cadvisorEntity) float64 { return float64(e.cg.throttled) }),
		throttling("container_cpu_cfs_throttled_seconds_total", "Total time duration the container has been throttled.", func(e *cadvisorEntity) float64 { return seconds(e.cg.throttledNanos) }),
		// Skiff reads no per-task load (cAdvisor needs netlink taskstats
		// for it, which the kubelet leaves off): zero, as upstream shows.
		one("container_cpu_load_average_10s", "Value of container cpu load average over the last 10 seconds.", gauge, func(*cadvisorEntity) float64 { return 0 }),
		one("container_cpu_load_d_average_10s", "Value of container cpu load.d average over the last 10 seconds.", gauge, func(*cadvisorEntity) float64 { return 0 }),
		one("container_cpu_system_seconds_total", "Cumulative system cpu time consumed in seconds.", counter, func(e *cadvisorEntity) float64 { return seconds(e.cg.cpuSystem) }),
		{name: "container_cpu_usage_seconds_total", help: "Cumulative cpu time consumed in seconds.", typ: counter, each: func(e *cadvisorEntity, w *textWriter, _ *deviceNames) {
			if e.cg.cpuNanos > 0 {
				w.series(`,cpu="total"`, seconds(e.cg.cpuNanos))
			}
		}},
		one("container_cpu_user_seconds_total", "Cumulative user cpu time consumed in seconds.", counter, func(e *cadvisorEntity) float64 { return seconds(e.cg.cpuUser) }),
		one("container_file_descriptors", "Number of open file descriptors for the container.", gauge, func(e *cadvisorEntity) float64 { return float64(e.cg.fds) }),
		diskFamily("container_fs_reads_bytes_total", "Cumulative count of bytes read", true, "Read"),
		diskFamily("container_fs_reads_total", "Cumulative count of reads completed", false, "Read"),
		diskFamily("container_fs_writes_bytes_total", "Cumulative count of bytes written", true, "Write"),
		diskFamily("container_fs_writes_total", "Cumulative count of writes completed", false, "Write"),
		{name: "container_last_seen", help: "Last time a container was seen by the exporter", typ: gauge}, // written by the scrape
		one("container_memory_cache", "Number of bytes of page cache memory.", gauge, func(e *cadvisorEntity) float64 { return float64(e.cg.cache) }),
		one("container_memory_failcnt", "Number of memory usage hits limits", counter, func(e *cadvisorEntity) float64 { return float64(e.cg.failcnt) }),
		{name: "container_memory_failures_total", help: "Cumulative count of memory allocation failures.", typ: counter, each: memoryFailures},
		one("container_memory_kernel_usage", "Size of kernel memory allocated in bytes.", gauge, func(e *cadvisorEntity) float64 { return float64(e.cg.kernel) }),
		one("container_memory_mapped_file", "Size of memory mapped files in bytes.", gauge, func(e *cadvisorEntity) float64 { return float64(e.cg.mappedFile) }),
		one("container_memory_max_usage_bytes", "Maximum memory usage recorded in bytes", gauge, func(e *cadvisorEntity) float64 { return float64(e.cg.maxUsage) }),
		one("container_memory_rss", "Size of RSS in bytes.", gauge, func(e *cadvisorEntity) float64 { return float64(e.cg.rss) }),
		one("container_memory_swap", "Container swap usage in bytes.", gauge, func(e *cadvisorEntity) float64 { return float64(e.cg.swap) }),
		one("container_memory_total_active_file_bytes", "Current total active file in bytes.", gauge, func(e *cadvisorEntity) float64 { return float64(e.cg.activeFile) }),
		one("container_memory_total_inactive_file_bytes", "Current total inactive file in bytes.", gauge, func(e *cadvisorEntity) float64 { return float64(e.cg.inactiveFile) }),
		one("container_memory_usage_bytes", "Current memory usage in bytes, including all memory regardless of when it was accessed", gauge, func(e *cadvisorEntity) float64 { return float64(e.cg.usage) }),
		one("container_memory_working_set_bytes", "Current working set in bytes.", gauge, func(e *cadvisorEntity) float64 { return float64(e.cg.workingSet) }),
		netFamily("container_network_receive_bytes_total", "Cumulative count of bytes received", func(n *netCounters) uint64 { return n.rxBytes }),
		netFamily("container_network_receive_errors_total", "Cumulative count of errors encountered while receiving", func(n *netCounters) uint64 { return n.rxErrors }),
		netFamily("container_network_receive_packets_dropped_total", "Cumulative count of packets dropped while receiving", func(n *netCounters) uint64 { return n.rxDrops }),
		netFamily("container_network_receive_packets_total", "Cumulative count of packets received", func(n *netCounters) uint64 { return n.rxPackets }),
		netFamily("container_network_transmit_bytes_total", "Cumulative count of bytes transmitted", func(n *netCounters) uint64 { return n.txBytes }),
		netFamily("container_network_transmit_errors_total", "Cumulative count of errors encountered while transmitting", func(n *netCounters) uint64 { return n.txErrors }),
		netFamily("container_network_transmit_packets_dropped_total", "Cumulative count of packets dropped while transmitting", func(n *netCounters) uint64 { return n.txDrops }),
		netFamily("container_network_transmit_packets_total", "Cumulative count of packets transmitted", func(n *netCounters) uint64 { return n.txPackets }),
		one("container_oom_events_total", "Count of out of memory events observed for the container", counter, func(e *cadvisorEntity) float64 { return float64(e.cg.oomKills) }),
		pressure("container_pressure_cpu_stalled_seconds_total", "Total time duration no tasks in the container could make progress due to CPU congestion.", 0, 1),
		pressure("container_pressure_cpu_waiting_seconds_total", "Total time duration tasks in the container have waited due to CPU congestion.", 0, 0),
		pressure("container_pressure_io_stalled_seconds_total", "Total time duration no tasks in the container could make progress due to IO congestion.", 2, 1),
		pressure("container_pressure_io_waiting_seconds_total", "Total time duration tasks in the container have waited due to IO congestion.", 2, 0),
		pressure("container_pressure_memory_stalled_seconds_total", "Total time duration no tasks in the container could make progress due to memory congestion.", 1, 1),
		pressure("container_pressure_memory_waiting_seconds_total", "Total time duration tasks in the container have waited due to memory congestion.", 1, 0),
		one("container_processes", "Number of processes running inside the container.", gauge, func(e *cadvisorEntity) float64 { return float64(e.cg.procs) }),
		one("container_sockets", "Number of open sockets for the container.", gauge, func(e *cadvisorEntity) float64 { return float64(e.cg.sockets) }),
		spec("container_spec_cpu_period", "CPU period of the container.", func(e *cadvisorEntity) float64 { return float64(e.cg.period) }),
		{name: "container_spec_cpu_quota", help: "CPU quota of the container.", typ: gauge, spec: true, each: func(e *cadvisorEntity, w *textWriter, _ *deviceNames) {
			if e.cg.quota != 0 {
				w.series("", float64(e.cg.quota))
			}
		}},
		spec("container_spec_cpu_shares", "CPU share of the container.", func(e *cadvisorEntity) float64 { return float64(e.cg.shares) }),
		spec("container_spec_memory_limit_bytes", "Memory limit for the container.", func(e *cadvisorEntity) float64 { return specMemory(e.cg.memLimit) }),
		spec("container_spec_memory_reservation_limit_bytes", "Memory reservation limit for the container.", func(e *cadvisorEntity) float64 { return specMemory(e.cg.reservation) }),
		spec("container_spec_memory_swap_limit_bytes", "Memory swap limit for the container.", func(e *cadvisorEntity) float64 { return specMemory(e.cg.swapLimit) }),
		spec("container_start_time_seconds", "Start time of the container since unix epoch in seconds.", func(e *cadvisorEntity) float64 { return float64(e.start.Unix()) }),
		{name: "container_tasks_state", help: "Number of tasks in given state", typ: gauge, each: func(e *cadvisorEntity, w *textWriter, _ *deviceNames) {
			for _, s := range []string{`,state="sleeping"`, `,state="running"`, `,state="stopped"`, `,state="uninterruptible"`, `,state="iowaiting"`} {
				w.series(s, 0) // taskstats again: zero, as upstream
			}
		}},
		one("container_threads", "Number of threads running inside the container", gauge, func(e *cadvisorEntity) float64 { return float64(e.cg.threads) }),
		one("container_threads_max", "Maximum number of threads allowed inside the container, infinity if value is zero", gauge, func(e *cadvisorEntity) float64 { return float64(e.cg.threadsMax) }),
		{name: "container_ulimits_soft", help: "Soft ulimit values for the container root process. Unlimited if -1, except priority and nice", typ: gauge, each: func(e *cadvisorEntity, w *textWriter, _ *deviceNames) {
			if e.hasRoot {
				w.series(`,ulimit="max_open_files"`, float64(e.maxOpenFiles))
			}
		}},
	}
	sort.Slice(fs, func(i, j int) bool { return fs[i].name < fs[j].name })
	return fs
}()

func memoryFailures(e *cadvisorEntity, w *textWriter, _ *deviceNames) {
	// cAdvisor shows the cgroup's own counts for both scopes.
	w.series(`,failure_type="pgfault",scope="container"`, float64(e.cg.pgfault))
	w.series(`,failure_type="pgmajfault",scope="container"`, float64(e.cg.pgmajfault))
	w.series(`,failure_type="pgfault",scope="hierarchy"`, float64(e.cg.pgfault))
	w.series(`,failure_type="pgmajfault",scope="hierarchy"`, float64(e.cg.pgmajfault))
}

func blkioUsage(e *cadvisorEntity, w *textWriter, d *deviceNames) {
	for _, io := range e.cg.disk {
		dev := `,device="` + escape(d.name(io.major, io.minor)) + `",major="` + strconv.FormatUint(io.major, 10) +
			`",minor="` + strconv.FormatUint(io.minor, 10) + `",operation="`
		for op, v := range io.bytes {
			w.series(dev+op+`"`, float64(v))
		}
	}
}
