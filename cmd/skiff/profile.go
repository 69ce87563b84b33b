package main

import (
	"fmt"
	"os"
	"runtime/pprof"

	"k8s.io/klog/v2"
)

// startCPUProfile profiles the process into path until the returned stop
// is called (at exit), for `go tool pprof`.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			klog.ErrorS(err, "Writing the CPU profile failed", "path", path)
		}
	}, nil
}
