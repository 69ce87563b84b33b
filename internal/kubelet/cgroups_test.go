package kubelet

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
)

// The cgroup manager gets the runtime's driver, not the configured one:
// a runtime that says systemd on a host without systemd makes Skiff
// refuse to start, naming why, though the config says cgroupfs.
func TestCgroupsUseTheRuntimesDriver(t *testing.T) {
	if _, err := os.Stat("/run/systemd/system"); err == nil {
		t.Skip("systemd runs here: the runtime's driver would be usable")
	}
	rt := critest.NewFakeRuntimeService()
	rt.FakeLinuxConfiguration = &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_SYSTEMD}
	// Without per-QoS cgroups nothing is created on the host, whichever
	// driver is picked.
	perQOS := false
	cfg := Config{Kubelet: &kubeletconfig.KubeletConfiguration{
		CgroupDriver: "cgroupfs", CgroupRoot: "/", CgroupsPerQOS: &perQOS,
		CPUCFSQuotaPeriod: &metav1.Duration{Duration: 100 * time.Millisecond},
	}}
	_, err := NewPodCgroups(context.Background(), cfg, rt)
	if err == nil || !strings.Contains(err.Error(), "systemd is not running") {
		t.Fatalf("error %v, want the systemd driver refused for want of systemd", err)
	}
}
