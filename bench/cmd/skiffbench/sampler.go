package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// clockTicks is USER_HZ, the unit of utime/stime in /proc/<pid>/stat; 100
// on every Linux architecture Go supports.
const clockTicks = 100

// procSample is one reading of a process from /proc.
type procSample struct {
	at     time.Time
	rssKB  int64   // VmRSS
	anonKB int64   // RssAnon: heap and stacks, without the mapped binary
	cpuSec float64 // utime+stime
}

// sampler reads a process's RSS and CPU time every period until stopped.
type sampler struct {
	pid    int
	mu     sync.Mutex
	all    []procSample
	stopCh chan struct{}
	done   chan struct{}
}

func startSampler(pid int, period time.Duration) *sampler {
	s := &sampler{pid: pid, stopCh: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			s.sample()
			select {
			case <-s.stopCh:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *sampler) sample() {
	ps, err := readProc(s.pid)
	if err != nil {
		return // exited
	}
	s.mu.Lock()
	s.all = append(s.all, ps)
	s.mu.Unlock()
}

func (s *sampler) stop() {
	close(s.stopCh)
	<-s.done
}

// window returns the samples taken in [from, to], plus a fresh one now if
// to is in the future (so a window always ends with a current reading).
func (s *sampler) window(from, to time.Time) []procSample {
	if !time.Now().Before(to) {
		s.sample()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []procSample
	for _, p := range s.all {
		if !p.at.Before(from) && !p.at.After(to.Add(time.Second)) {
			out = append(out, p)
		}
	}
	return out
}

// usage summarizes a window: peak and median RSS, CPU seconds used, and the
// CPU as a share of one core.
type usage struct {
	PeakRSSMB   float64 `json:"peakRSSMB"`
	MedianRSSMB float64 `json:"medianRSSMB"`
	// MedianAnonMB is the anonymous part of MedianRSSMB's samples (heap,
	// stacks); the rest is the binary and other mapped files.
	MedianAnonMB float64 `json:"medianAnonMB"`
	CPUSeconds   float64 `json:"cpuSeconds"`
	CPUPercent   float64 `json:"cpuPercentOfOneCore"`
	Seconds      float64 `json:"seconds"`
}

func summarize(w []procSample) usage {
	if len(w) == 0 {
		return usage{}
	}
	rss := make([]float64, len(w))
	anon := make([]float64, len(w))
	var u usage
	for i, p := range w {
		rss[i] = float64(p.rssKB) / 1024
		anon[i] = float64(p.anonKB) / 1024
		if rss[i] > u.PeakRSSMB {
			u.PeakRSSMB = rss[i]
		}
	}
	u.MedianRSSMB = percentile(rss, 50)
	u.MedianAnonMB = percentile(anon, 50)
	first, last := w[0], w[len(w)-1]
	u.CPUSeconds = last.cpuSec - first.cpuSec
	u.Seconds = last.at.Sub(first.at).Seconds()
	if u.Seconds > 0 {
		u.CPUPercent = 100 * u.CPUSeconds / u.Seconds
	}
	return u
}

func readProc(pid int) (procSample, error) {
	now := time.Now()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procSample{}, err
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procSample{}, err
	}
	rss, err := parseStatusKB(string(status), "VmRSS")
	if err != nil {
		return procSample{}, err
	}
	anon, err := parseStatusKB(string(status), "RssAnon")
	if err != nil {
		return procSample{}, err
	}
	cpu, err := parseCPU(string(stat))
	if err != nil {
		return procSample{}, err
	}
	return procSample{at: now, rssKB: rss, anonKB: anon, cpuSec: cpu}, nil
}

// parseStatusKB reads a field such as "VmRSS:   12345 kB" from
// /proc/<pid>/status.
func parseStatusKB(status, field string) (int64, error) {
	for _, l := range strings.Split(status, "\n") {
		if rest, ok := strings.CutPrefix(l, field+":"); ok {
			f := strings.Fields(rest)
			if len(f) < 1 {
				break
			}
			return strconv.ParseInt(f[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc status", field)
}

// parseCPU returns utime+stime in seconds from /proc/<pid>/stat. The
// command name (field 2) may hold spaces, so fields are counted from its
// closing parenthesis.
func parseCPU(stat string) (float64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed /proc stat")
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc stat")
	}
	ut, err := strconv.ParseUint(f[11], 10, 64)
	if err != nil {
		return 0, err
	}
	st, err := strconv.ParseUint(f[12], 10, 64)
	if err != nil {
		return 0, err
	}
	return float64(ut+st) / clockTicks, nil
}
