package stats

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
)

// write creates path under dir with content, making directories.
func write(t testing.TB, dir, path, content string) {
	t.Helper()
	full := filepath.Join(dir, path)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// verboseRuntime answers verbose sandbox status with containerd's info
// JSON, which the CRI fake does not.
type verboseRuntime struct {
	*critest.FakeRuntimeService
	info map[string]string // sandbox ID → info JSON
}

func (r verboseRuntime) PodSandboxStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	resp, err := r.FakeRuntimeService.PodSandboxStatus(ctx, id, verbose)
	if err == nil && verbose {
		resp.Info = map[string]string{"info": r.info[id]}
	}
	return resp, err
}

const netDevFile = `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:  500       5    0    0    0     0          0         0      500       5    0    0    0     0       0          0
  eth0: 1000      10    1    0    0     0          0         0     2000      20    2    0    0     0       0          0
vethabc:  300       3    0    0    0     0          0         0      400       4    0    0    0     0       0          0
`

const netDevNode = netDevFile + `  ens5: 7000      70    0    0    0     0          0         0     8000      80    0    0    0     0       0          0
`

// fakeProc lays out the /proc files the node figures come from.
func fakeProc(t testing.TB, dir string) {
	write(t, dir, "meminfo", "MemTotal:        8388608 kB\nMemFree:         4194304 kB\nInactive(file):   1048576 kB\nAnonPages:  524288 kB\n")
	write(t, dir, "stat", "cpu  100 0 50 1000 10 0 0 0 0 0\ncpu0 100 0 50 1000 10 0 0 0 0 0\nbtime 1700000000\n")
	write(t, dir, "vmstat", "pgfault 77\npgmajfault 7\n")
	write(t, dir, "loadavg", "0.10 0.20 0.30 2/345 6789\n")
	write(t, dir, "sys/kernel/pid_max", "4194304\n")
	write(t, dir, "net/dev", netDevNode)
	write(t, dir, "net/route", "Iface\tDestination\tGateway\nens5\t00000000\t0101A8C0\neth0\t0000A8C0\t00000000\n")
}

// cgroupV1 writes one v1 cgroup's CPU and memory files.
func cgroupV1(t *testing.T, root, path, cpu, usage, stat string) {
	write(t, root, filepath.Join("cpuacct", path, "cpuacct.usage"), cpu+"\n")
	write(t, root, filepath.Join("memory", path, "memory.usage_in_bytes"), usage+"\n")
	write(t, root, filepath.Join("memory", path, "memory.stat"), stat)
}
