package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// quietWindow is what waitQuiet measures idleness over.
const quietWindow = 5 * time.Second

// cpuTimes are the machine's aggregate CPU jiffies (the "cpu" line of
// /proc/stat): idle (idle + iowait) and the total.
type cpuTimes struct{ idle, total uint64 }

func parseProcStat(b []byte) (cpuTimes, error) {
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[0] != "cpu" {
			continue
		}
		var t cpuTimes
		for i, s := range f[1:] {
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return cpuTimes{}, fmt.Errorf("/proc/stat: %q: %w", line, err)
			}
			// guest and guest_nice (9th, 10th) are already in user and nice.
			if i >= 8 {
				break
			}
			t.total += v
			if i == 3 || i == 4 { // idle, iowait
				t.idle += v
			}
		}
		return t, nil
	}
	return cpuTimes{}, errors.New("/proc/stat: no cpu line")
}

func readCPUTimes() (cpuTimes, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}, err
	}
	return parseProcStat(b)
}

// idleFraction is the share of CPU time spent idle between a and b.
func idleFraction(a, b cpuTimes) float64 {
	if b.total <= a.total {
		return 1
	}
	return float64(b.idle-a.idle) / float64(b.total-a.total)
}

// waitQuiet waits until the machine was at least minIdle idle over one
// window (the previous workload's teardown in the runtime done), or max
// has passed; it returns how long it waited and the last idle share. The
// load average is no use here: it lags a busy minute by minutes.
func waitQuiet(ctx context.Context, minIdle float64, window, max time.Duration) (time.Duration, float64, error) {
	start := time.Now()
	prev, err := readCPUTimes()
	if err != nil {
		return 0, 0, err
	}
	for {
		sleepCtx(ctx, window)
		if err := ctx.Err(); err != nil {
			return time.Since(start), 0, err
		}
		cur, err := readCPUTimes()
		if err != nil {
			return time.Since(start), 0, err
		}
		idle := idleFraction(prev, cur)
		if idle >= minIdle || time.Since(start) >= max {
			return time.Since(start), idle, nil
		}
		prev = cur
	}
}
