package stats

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// cadvisorEntity is one cgroup as cAdvisor's Prometheus collector shows it
// to the upstream kubelet: a container, a pod's sandbox (pause) container
// or a pod cgroup. Everything in it comes from one sample.
type cadvisorEntity struct {
	// labels are the base labels, rendered: container, id (the cgroup),
	// image, name (the runtime's ID), namespace, pod.
	labels string
	t      time.Time // when its stats were read
	start  time.Time
	cg     cgStats
	net    []netCounters // the sandbox's network namespace; nil for others
	// maxOpenFiles is the soft RLIMIT_NOFILE of the root process (-1:
	// unlimited); only for an entity with a root process (hasRoot).
	maxOpenFiles int64
	hasRoot      bool
}

// cadvisorScrape is what one scrape renders: the entities of the last
// sample, the machine, and whether the sample failed.
type cadvisorScrape struct {
	now      time.Time
	entities []*cadvisorEntity
	machine  *machineInfo
	failed   bool
	devices  *deviceNames
}

// CadvisorHandler serves /metrics/cadvisor: the series cAdvisor gives the
// upstream kubelet, from the last sample (taking one if that one left
// them out: the first scrape, or the first in cadvisorIdle).
// It writes Prometheus' text format itself: a scrape of a node with 100
// pods writes some 15000 series, and building them as client_golang
// metrics costs far more than the sample they come from.
func (p *Provider) CadvisorHandler() http.Handler {
	var pool sync.Pool
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sc := p.cadvisorScrape(r)
		tw, _ := pool.Get().(*textWriter)
		if tw == nil {
			tw = &textWriter{}
		}
		tw.reset()
		sc.write(tw)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		if _, err := w.Write(tw.buf); err != nil {
			klog.V(4).InfoS("Writing /metrics/cadvisor failed", "err", err)
		}
		if cap(tw.buf) < 16<<20 {
			pool.Put(tw)
		}
	})
}

func (p *Provider) cadvisorScrape(r *http.Request) cadvisorScrape {
	p.cadvisorAsked.Store(p.now().UnixNano())
	p.mu.RLock()
	s := p.snap
	p.mu.RUnlock()
	failed := false
	if s == nil || !s.withCadvisor {
		if err := p.Sample(r.Context()); err != nil {
			klog.ErrorS(err, "Sampling for /metrics/cadvisor failed")
			failed = true
		}
		p.mu.RLock()
		s = p.snap
		p.mu.RUnlock()
	}
	sc := cadvisorScrape{now: p.now(), machine: p.machine(), devices: &p.devices, failed: failed || s == nil}
	if s != nil {
		sc.entities = s.cadvisor
	}
	return sc
}

// write renders the scrape family by family, in name order.
func (sc cadvisorScrape) write(w *textWriter) {
	m := sc.machine
	w.family("cadvisor_version_info", cadvisorVersionHelp, "gauge")
	w.line("cadvisorRevision=\"\",cadvisorVersion=\"\",dockerVersion=\"\",kernelVersion=\""+escape(m.kernel)+
		"\",osVersion=\""+escape(m.osVersion)+"\"", "", 1, time.Time{})
	last := sc.now.Truncate(time.Second)
	for i := range containerFamilies {
		f := &containerFamilies[i]
		w.family(f.name, f.help, f.typ)
		for _, e := range sc.entities {
			if f.name == "container_last_seen" {
				w.line(e.labels, "", float64(last.Unix()), sc.now)
				continue
			}
			ts := e.t
			if f.spec {
				ts = time.Time{}
			}
			w.entity(e.labels, ts)
			f.each(e, w, sc.devices)
		}
	}
	w.family("container_scrape_error", "1 if there was an error while getting container metrics, 0 otherwise", "gauge")
	w.line("", "", b2f(sc.failed), time.Time{})
	sc.writeMachine(w)
}

func (sc cadvisorScrape) writeMachine(w *textWriter) {
	m := sc.machine
	base := "boot_id=\"" + escape(m.bootID) + "\",machine_id=\"" + escape(m.machineID) + "\",system_uuid=\"" + escape(m.systemUUID) + "\""
	for _, g := range []struct {
		name, help string
		v          uint64
	}{
		{"machine_cpu_cores", "Number of logical CPU cores.", m.cores},
		{"machine_cpu_physical_cores", "Number of physical CPU cores.", m.physicalCores},
		{"machine_cpu_sockets", "Number of CPU sockets.", m.sockets},
		{"machine_memory_bytes", "Amount of memory installed on the machine.", m.memory},
	} {
		w.family(g.name, g.help, "gauge")
		w.line(base, "", float64(g.v), time.Time{})
	}
	// Skiff reads no NVM (it needs ipmctl): zero, as cAdvisor without it.
	w.family("machine_nvm_avg_power_budget_watts", "NVM power budget.", "gauge")
	w.line(base, "", 0, time.Time{})
	w.family("machine_nvm_capacity", "NVM capacity value labeled by NVM mode (memory mode or app direct mode).", "gauge")
	w.line(base, `,mode="memory_mode"`, 0, time.Time{})
	w.line(base, `,mode="app_direct_mode"`, 0, time.Time{})
	w.family("machine_scrape_error", "1 if there was an error while getting machine metrics, 0 otherwise.", "gauge")
	w.line("", "", 0, time.Time{})
	w.family("machine_swap_bytes", "Amount of swap memory available on the machine.", "gauge")
	w.line(base, "", float64(m.swap), time.Time{})
}

const cadvisorVersionHelp = "A metric with a constant '1' value labeled by kernel version, OS version, docker version, cadvisor version & cadvisor revision."

// textWriter writes Prometheus' text exposition format (version 0.0.4).
// A family's HELP and TYPE lines are written with its first series, so a
// family without series is left out, as client_golang does.
type textWriter struct {
	buf             []byte
	name, help, typ string
	headerDone      bool
	entityLabels    string
	entityTime      time.Time
}

func (w *textWriter) reset() { w.buf = w.buf[:0] }

// family starts a family; its header waits for its first series.
func (w *textWriter) family(name, help, typ string) {
	w.name, w.help, w.typ, w.headerDone = name, help, typ, false
}

// entity sets the base labels and timestamp that series use.
func (w *textWriter) entity(labels string, t time.Time) { w.entityLabels, w.entityTime = labels, t }

// series writes one series of the current entity; extra is the family's
// own labels, rendered with a leading comma (`,cpu="total"`), or "".
func (w *textWriter) series(extra string, v float64) { w.line(w.entityLabels, extra, v, w.entityTime) }

func (w *textWriter) line(labels, extra string, v float64, t time.Time) {
	if !w.headerDone {
		w.buf = append(w.buf, "# HELP "...)
		w.buf = append(w.buf, w.name...)
		w.buf = append(w.buf, ' ')
		w.buf = append(w.buf, strings.ReplaceAll(w.help, "\\", `\\`)...)
		w.buf = append(w.buf, "\n# TYPE "...)
		w.buf = append(w.buf, w.name...)
		w.buf = append(w.buf, ' ')
		w.buf = append(w.buf, w.typ...)
		w.buf = append(w.buf, '\n')
		w.headerDone = true
	}
	w.buf = append(w.buf, w.name...)
	if labels != "" || extra != "" {
		w.buf = append(w.buf, '{')
		w.buf = append(w.buf, labels...)
		if labels == "" && extra != "" {
			extra = extra[1:]
		}
		w.buf = append(w.buf, extra...)
		w.buf = append(w.buf, '}')
	}
	w.buf = append(w.buf, ' ')
	w.buf = strconv.AppendFloat(w.buf, v, 'g', -1, 64)
	if !t.IsZero() {
		w.buf = append(w.buf, ' ')
		w.buf = strconv.AppendInt(w.buf, t.UnixMilli(), 10)
	}
	w.buf = append(w.buf, '\n')
}

// escape escapes a label value: backslash, double quote and newline.
func escape(s string) string {
	if !strings.ContainsAny(s, "\\\"\n") {
		return s
	}
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

// baseLabels renders the base labels of an entity, in name order.
func baseLabels(container, id, image, name, namespace, pod string) string {
	return `container="` + escape(container) + `",id="` + escape(id) + `",image="` + escape(image) +
		`",name="` + escape(name) + `",namespace="` + escape(namespace) + `",pod="` + escape(pod) + `"`
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
