package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// results is everything one benchmark run measured.
type results struct {
	Date      string            `json:"date"`
	Machine   machine           `json:"machine"`
	Options   map[string]string `json:"options"`
	Note      string            `json:"note,omitempty"`
	Rows      []row             `json:"rows"`
	Workloads []*workloadResult `json:"workloads"`
	Nodes     []*nodeResult     `json:"nodes"`
	profiles  []string
	heaps     map[string]string // kubelet kind: its last heap profile
	skiffBin  string
	order     []string // workloads in run order
	base      string   // the files' path without suffix, once written
}

type machine struct {
	Hostname    string `json:"hostname"`
	CPUs        int    `json:"cpus"`
	CPUModel    string `json:"cpuModel"`
	MemoryGB    string `json:"memory"`
	Kernel      string `json:"kernel"`
	LoadStart   string `json:"loadAverageAtStart"`
	LoadEnd     string `json:"loadAverageAtEnd"`
	OtherProcsB string `json:"busiestOtherProcessesAtStart,omitempty"`
	// Runtime is the container runtime every figure of the run is from,
	// as its CRI Version call names it: "containerd v2.4.2".
	Runtime string `json:"runtime"`
}

// row is one line of the table: a metric for both kubelets.
type row struct {
	Section  string `json:"section"`
	Metric   string `json:"metric"`
	Skiff    jnum   `json:"skiff"`
	Upstream jnum   `json:"upstream"`
	Ratio    jnum   `json:"ratio"` // skiff / upstream
	// Runtime is the same metric with no kubelet (the bare-CRI batch),
	// where it has one: the runtime's own limit.
	Runtime jnum   `json:"runtime"`
	Note    string `json:"note,omitempty"`
}

// jnum is a number that is null in JSON when it is NaN (nothing measured).
type jnum float64

func (n jnum) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(n)) || math.IsInf(float64(n), 0) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(n))
}

func newResults(o options) *results {
	r := &results{
		Date:    time.Now().UTC().Format(time.RFC3339),
		Machine: describeMachine(),
		Note:    o.note,
		Options: map[string]string{
			"rounds": fmt.Sprint(o.rounds), "small": fmt.Sprint(o.small), "large": fmt.Sprint(o.large),
			"churn": fmt.Sprint(o.churn), "inFlight": fmt.Sprint(o.flight), "workloads": o.workloads,
			"idle": o.idle.String(), "hold": o.hold.String(), "quietIdle": fmt.Sprint(o.quietIdle),
		},
		order:    strings.Split(o.workloads, ","),
		heaps:    map[string]string{},
		skiffBin: o.skiffBin,
	}
	return r
}

func (r *results) add(w *workloadResult) { r.Workloads = append(r.Workloads, w) }

func (r *results) node(kind string, round int) *nodeResult {
	for _, n := range r.Nodes {
		if n.Kubelet == kind && n.Round == round {
			return n
		}
	}
	n := &nodeResult{Kubelet: kind, Round: round}
	r.Nodes = append(r.Nodes, n)
	return n
}

// pick returns the workload's runs of one kubelet.
func (r *results) pick(w, kind string) []*workloadResult {
	var out []*workloadResult
	for _, x := range r.Workloads {
		if x.Workload == w && x.Kubelet == kind {
			out = append(out, x)
		}
	}
	return out
}

// metric extracts a number from a kubelet's runs of a workload: pooled per
// pod samples, or the median over rounds.
type metric struct {
	name string
	get  func(runs []*workloadResult) float64
}

func pooled(f func(*workloadResult) []float64, p float64) func([]*workloadResult) float64 {
	return func(runs []*workloadResult) float64 {
		var all []float64
		for _, x := range runs {
			all = append(all, f(x)...)
		}
		return percentile(all, p)
	}
}

func perRound(f func(*workloadResult) float64) func([]*workloadResult) float64 {
	return func(runs []*workloadResult) float64 {
		var v []float64
		for _, x := range runs {
			v = append(v, f(x))
		}
		return median(v)
	}
}

func workloadMetrics(w string) []metric {
	running := func(x *workloadResult) []float64 { return x.Running }
	ready := func(x *workloadResult) []float64 { return x.Ready }
	del := func(x *workloadResult) []float64 { return x.Delete }
	if w == "e" {
		return killMetrics()
	}
	ms := []metric{
		{"create→Running p50 (s)", pooled(running, 50)},
		{"create→Running p99 (s)", pooled(running, 99)},
		{"create→Ready p50 (s)", pooled(ready, 50)},
		{"create→Ready p90 (s)", pooled(ready, 90)},
		{"create→Ready p99 (s)", pooled(ready, 99)},
		{"create→Ready max (s)", pooled(ready, 100)},
		{"delete→gone p50 (s)", pooled(del, 50)},
		{"delete→gone p99 (s)", pooled(del, 99)},
		{"delete→gone max (s)", pooled(del, 100)},
	}
	if w == "d" {
		ms = append(ms, metric{"loop makespan (s)", perRound(func(x *workloadResult) float64 { return x.ReadyMakespan })})
	} else {
		ms = append(ms,
			metric{"makespan to all Ready (s)", perRound(func(x *workloadResult) float64 { return x.ReadyMakespan })},
			metric{"makespan of deletion (s)", perRound(func(x *workloadResult) float64 { return x.DeleteMakespan })},
			metric{"steady RSS, all Ready (MB)", perRound(func(x *workloadResult) float64 { return x.Steady.MedianRSSMB })},
			metric{"  of which anonymous (MB)", perRound(func(x *workloadResult) float64 { return x.Steady.MedianAnonMB })},
			metric{"steady CPU, all Ready (% of a core)", perRound(func(x *workloadResult) float64 { return x.Steady.CPUPercent })})
	}
	ms = append(ms, criMetrics(w)...)
	return append(ms,
		metric{"peak RSS (MB)", perRound(func(x *workloadResult) float64 { return x.Usage.PeakRSSMB })},
		metric{"CPU time (s)", perRound(func(x *workloadResult) float64 { return x.Usage.CPUSeconds })},
		metric{"API requests per pod", perRound(func(x *workloadResult) float64 { return x.requestsPerPod() })},
	)
}

// computeRows builds the table.
func (r *results) computeRows() {
	r.Rows = nil
	nodeMetric := func(name string, f func(*nodeResult) float64) {
		get := func(kind string) float64 {
			var v []float64
			for _, n := range r.Nodes {
				if n.Kubelet == kind {
					v = append(v, f(n))
				}
			}
			return median(v)
		}
		r.Rows = append(r.Rows, newRow("node", name, get(skiff), get(upstream), ""))
	}
	nodeMetric("start → Node Ready (s)", func(n *nodeResult) float64 { return n.StartupSeconds })
	nodeMetric("idle CPU (% of a core)", func(n *nodeResult) float64 { return n.Idle.CPUPercent })
	nodeMetric("idle RSS (MB)", func(n *nodeResult) float64 { return n.Idle.MedianRSSMB })
	nodeMetric("  of which anonymous (MB)", func(n *nodeResult) float64 { return n.Idle.MedianAnonMB })
	nodeMetric("peak RSS over the run, VmHWM (MB)", func(n *nodeResult) float64 { return n.VmHWMMB })
	for _, w := range r.order {
		s, u := r.pick(w, skiff), r.pick(w, upstream)
		if len(s) == 0 || len(u) == 0 {
			continue
		}
		rt := r.pick(w, bare)
		note := runNotes(s, u, rt)
		for _, m := range workloadMetrics(w) {
			row := newRow(s[0].Name, m.name, m.get(s), m.get(u), note)
			if len(rt) > 0 && limited(m.name) {
				row.Runtime = jnum(m.get(rt))
			}
			r.Rows = append(r.Rows, row)
		}
	}
}

// limited says whether a metric has a runtime limit: the times to Ready
// and the makespans, which a bare-CRI batch also has.
func limited(metric string) bool {
	return strings.HasPrefix(metric, "create→Ready") || strings.HasPrefix(metric, "create→Running") || strings.HasPrefix(metric, "makespan")
}

func newRow(section, metric string, s, u float64, note string) row {
	ratio := math.NaN()
	if u != 0 && !math.IsNaN(s) && !math.IsNaN(u) && note == "" {
		ratio = s / u
	}
	return row{Section: section, Metric: metric, Skiff: jnum(s), Upstream: jnum(u), Ratio: jnum(ratio), Runtime: jnum(math.NaN()), Note: note}
}

// runNotes says why a workload's rows do not compare, if they do not.
func runNotes(runs ...[]*workloadResult) string {
	var notes []string
	for _, rs := range runs {
		for _, x := range rs {
			if x.NotComparable != "" {
				notes = append(notes, fmt.Sprintf("not comparable (%s, round %d): %s", x.Kubelet, x.Round, x.NotComparable))
			}
			if x.Error != "" {
				notes = append(notes, fmt.Sprintf("incomplete (%s, round %d): %s", x.Kubelet, x.Round, x.Error))
			}
		}
	}
	return strings.Join(notes, "; ")
}

// write prints the table and writes <out>/<date>-<host>.{json,md} and
// the raw samples, compressed, to <out>/<date>-<host>.samples.json.gz.
func (r *results) write(outDir string, stdout io.Writer) error {
	r.Machine.LoadEnd = loadAverage()
	r.computeRows()
	md := r.markdown()
	fmt.Fprintln(stdout)
	fmt.Fprint(stdout, md)
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	base := filepath.Join(outDir, time.Now().UTC().Format("2006-01-02T1504Z")+"-"+r.Machine.Hostname+runtimeSuffix(r.Machine.Runtime))
	r.base = base
	if err := writeSamples(base+".samples.json.gz", r); err != nil {
		return err
	}
	js, err := json.Marshal(r.summary())
	if err != nil {
		return err
	}
	if err := os.WriteFile(base+".json", append(js, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(base+".md", []byte(md), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nwritten: %s.json, %s.md, %s.samples.json.gz\n", base, base, base)
	if len(r.profiles) > 0 {
		r.saveProfile(r.profiles[len(r.profiles)-1], base, stdout)
	}
	r.saveHeaps(base, stdout)
	return nil
}

// saveProfile keeps the last Skiff run's CPU profile next to the results,
// with `go tool pprof -top` of it as text.
func (r *results) saveProfile(src, base string, stdout io.Writer) {
	dst, txt := base+"-skiff.cpu.pprof", base+"-skiff.cpu.txt"
	if err := keepProfile(src, dst, txt, r.skiffBin); err != nil {
		fmt.Fprintf(stdout, "CPU profile: %v\n", err)
		return
	}
	fmt.Fprintf(stdout, "CPU profile of the last Skiff run: %s (top: %s)\n", dst, txt)
}

// keepProfile copies a profile to dst and writes `go tool pprof -top` of
// it, with args before the profile, to txt.
func keepProfile(src, dst, txt string, args ...string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		return err
	}
	cmd := append(append([]string{"tool", "pprof", "-top", "-nodecount=40"}, args...), dst)
	out, err := exec.Command("go", cmd...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("go tool pprof: %w\n%s", err, out)
	}
	return os.WriteFile(txt, out, 0o644)
}

func describeMachine() machine {
	m := machine{CPUs: runtime.NumCPU(), LoadStart: loadAverage()}
	m.Hostname, _ = os.Hostname()
	var u syscall.Utsname
	if syscall.Uname(&u) == nil {
		m.Kernel = utsString(u.Release[:])
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb float64
		for _, l := range strings.Split(string(b), "\n") {
			if _, err := fmt.Sscanf(l, "MemTotal: %f kB", &kb); err == nil {
				m.MemoryGB = fmt.Sprintf("%.1f GiB", kb/1024/1024)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				m.CPUModel = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	return m
}

func utsString(b []int8) string {
	var s []byte
	for _, c := range b {
		if c == 0 {
			break
		}
		s = append(s, byte(c))
	}
	return string(s)
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// killMetrics are workload e's rows: a killed container's exit to its
// status in a watch, and the stages in between.
func killMetrics() []metric {
	stage := func(name string) func(*workloadResult) []float64 {
		return func(x *workloadResult) []float64 { return x.Kill[name] }
	}
	return []metric{
		{"exit→watch p50 (s)", pooled(stage(exitWatch), 50)},
		{"exit→watch p90 (s)", pooled(stage(exitWatch), 90)},
		{"exit→watch max (s)", pooled(stage(exitWatch), 100)},
		{"  kill→exit p50 (s)", pooled(stage(killExit), 50)},
		{"  exit→status patch p50 (s)", pooled(stage(exitPatch), 50)},
		{"  exit→status patch p90 (s)", pooled(stage(exitPatch), 90)},
		{"  status patch→watch p50 (s)", pooled(stage(patchWatch), 50)},
		{"killed containers reported", perRound(func(x *workloadResult) float64 { return float64(len(x.Kill[exitWatch])) })},
		{"CPU time (s)", perRound(func(x *workloadResult) float64 { return x.Usage.CPUSeconds })},
		{"API requests per pod", perRound(func(x *workloadResult) float64 { return x.requestsPerPod() })},
	}
}

// runtimeSuffix names result files after the runtime ("-containerd-2.4.2"),
// so runs on two runtimes sit side by side.
func runtimeSuffix(rt string) string {
	if rt == "" {
		return ""
	}
	return "-" + strings.NewReplacer(" v", "-", " ", "-", "/", "-").Replace(rt)
}
