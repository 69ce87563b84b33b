package main

import (
	"fmt"
	"math"
	"sort"
)

// workloadResult is one workload run with one kubelet in one round.
type workloadResult struct {
	Workload      string `json:"workload"`
	Name          string `json:"name"`
	Kubelet       string `json:"kubelet"`
	Round         int    `json:"round"`
	Pods          int    `json:"pods"`
	Error         string `json:"error,omitempty"`
	NotComparable string `json:"notComparable,omitempty"`
	// Per pod, seconds: create request → Running / Ready seen through the
	// watch, delete request → object gone.
	// These and the other per-sample fields go to the run's samples file;
	// its summary JSON leaves them out (see write).
	Running []float64 `json:"running,omitempty"`
	Ready   []float64 `json:"ready,omitempty"`
	Delete  []float64 `json:"delete,omitempty"`
	// Makespans, seconds: first create → last Ready; first delete → last
	// gone. The churn loop has one makespan: the whole loop.
	ReadyMakespan  float64 `json:"readyMakespan"`
	DeleteMakespan float64 `json:"deleteMakespan"`
	// The kubelet process during the workload, and during the hold with
	// every pod Ready (batches).
	Usage  usage `json:"usage"`
	Steady usage `json:"steady"`
	// The node's API requests during the workload, by verb and resource.
	Requests requestCounts `json:"requests"`
	// Skiff only: its PodStartupBreakdown events, by phase (seconds), and
	// how many there were (their creates are in Requests; see perPod).
	Breakdown       map[string][]float64 `json:"breakdown,omitempty"`
	BreakdownEvents int                  `json:"breakdownEvents,omitempty"`
	// Workloads a–d: the kubelet's CRI operations per pod (crireads.go).
	CRI *criPerPod `json:"cri,omitempty"`
	// Workload e: per killed container, seconds between the stages of
	// its report (kill.go).
	Kill map[string][]float64 `json:"kill,omitempty"`
	// Before the workload: how long the machine took to be quiet
	// (waitQuiet), and its idle share over the last window.
	QuietWaitSeconds float64 `json:"quietWaitSeconds"`
	IdleAtStart      float64 `json:"idleAtStart"`
}

func (w *workloadResult) fill(r batchResult) {
	if r.err != nil {
		w.Error = r.err.Error()
	}
	for _, p := range r.pods {
		w.Pods++
		if !p.created.IsZero() && !p.running.IsZero() {
			w.Running = append(w.Running, p.running.Sub(p.created).Seconds())
		}
		if !p.created.IsZero() && !p.ready.IsZero() {
			w.Ready = append(w.Ready, p.ready.Sub(p.created).Seconds())
		}
		if !p.deleteReq.IsZero() && !p.gone.IsZero() {
			w.Delete = append(w.Delete, p.gone.Sub(p.deleteReq).Seconds())
		}
	}
	if !r.allReady.IsZero() {
		w.ReadyMakespan = r.allReady.Sub(r.start).Seconds()
	}
	if !r.allGone.IsZero() && w.Workload != "d" {
		w.DeleteMakespan = r.allGone.Sub(r.delStart).Seconds()
	}
}

// requestsPerPod is the node's API requests per pod lifecycle, without the
// PodStartupBreakdown event creates (one per pod, Skiff's benchmark-only
// extra).
func (w *workloadResult) requestsPerPod() float64 {
	if w.Pods == 0 {
		return 0
	}
	return float64(w.Requests.total()-w.BreakdownEvents) / float64(w.Pods)
}

func (w *workloadResult) line() string {
	s := fmt.Sprintf("%-34s ready p50 %5.2fs p99 %5.2fs makespan %5.2fs, delete p50 %5.2fs, %5.1f req/pod, peak %3.0f MB, %.1f CPU s",
		w.Name, percentile(w.Ready, 50), percentile(w.Ready, 99), w.ReadyMakespan, percentile(w.Delete, 50),
		w.requestsPerPod(), w.Usage.PeakRSSMB, w.Usage.CPUSeconds)
	if c := w.CRI; c != nil {
		s += fmt.Sprintf("; CRI per pod: %.1f reads (%.1f state), %.1f writes, %.1f other", c.Reads, c.StateReads, c.Writes, c.Other)
	}
	if ew := w.Kill[exitWatch]; len(ew) > 0 {
		s += fmt.Sprintf("; %d kills: exit→watch p50 %.3fs p90 %.3fs (exit→patch p50 %.3fs, patch→watch p50 %.3fs)",
			len(ew), percentile(ew, 50), percentile(ew, 90), percentile(w.Kill[exitPatch], 50), percentile(w.Kill[patchWatch], 50))
	}
	if w.Error != "" {
		s += " [incomplete: " + w.Error + "]"
	}
	if w.NotComparable != "" {
		s += " [not comparable: " + w.NotComparable + "]"
	}
	if w.QuietWaitSeconds > quietWindow.Seconds()+1 {
		s += fmt.Sprintf(" (waited %.0fs for the machine to be quiet, %.0f%% idle)", w.QuietWaitSeconds, 100*w.IdleAtStart)
	}
	return s
}

// nodeResult is one kubelet run's node-level figures.
type nodeResult struct {
	Kubelet        string  `json:"kubelet"`
	Round          int     `json:"round"`
	StartupSeconds float64 `json:"startupSeconds"` // process start → Node Ready
	Idle           usage   `json:"idle"`
	VmHWMMB        float64 `json:"vmHWMMB"` // peak RSS over the whole run
}

// percentile is the nearest-rank percentile of xs (NaN when empty).
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	if rank < 1 {
		rank = 1
	}
	return s[rank-1]
}

func median(xs []float64) float64 { return percentile(xs, 50) }
