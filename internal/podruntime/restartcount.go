package podruntime

import (
	"os"
	"strconv"
	"strings"

	"k8s.io/klog/v2"
)

// restartCountFromLogs is the restart count of a container the runtime
// has no instance of: one past the highest <n>.log (rotated ones
// included) in its log directory, or 0. A runtime that lost its state (a
// node reboot, a wiped root) would otherwise start the count again at 0
// and write into the log of an earlier attempt, as upstream guards
// against the same way.
func restartCountFromLogs(dir string) int {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if !os.IsNotExist(err) {
			klog.ErrorS(err, "Cannot read a container's log directory for its restart count", "dir", dir)
		}
		return 0
	}
	count := 0
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		prefix, rest, ok := strings.Cut(e.Name(), ".log")
		if !ok || rest != "" && rest[0] != '.' {
			continue
		}
		n, err := strconv.Atoi(prefix)
		if err != nil || n < 0 {
			continue
		}
		count = max(count, n+1)
	}
	return count
}
