// Package kubeletconfig writes the KubeletConfiguration the e2e suite and
// the benchmark run the upstream kubelet with on this machine, so that a
// comparison with Skiff is made under the same settings.
package kubeletconfig

import (
	"fmt"
	"strings"
)

// Comparison is what differs between the kubelets of one machine.
type Comparison struct {
	Endpoint     string // the CRI endpoint
	CgroupRoot   string // "" for the runtime's default
	Port         int    // the kubelet API's
	HealthzPort  int
	ClientCAFile string // the cluster CA: the apiserver's node proxy authenticates with it
	Taints       []string
}

// YAML is the configuration: the cgroupfs driver (the test runtimes'
// runc), no swap check, client certificates of the cluster CA and no
// anonymous or webhook auth, and image GC and hard eviction that cannot
// trip during a run. Each taint key is registered with NoSchedule.
func (c Comparison) YAML() string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: %s
cgroupDriver: cgroupfs
failSwapOn: false
address: 0.0.0.0
port: %d
healthzPort: %d
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
authentication:
  x509:
    clientCAFile: %s
  anonymous:
    enabled: false
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%%"
  imagefs.available: "1%%"
  nodefs.inodesFree: "1%%"
resolvConf: /etc/resolv.conf
clusterDomain: cluster.local
`, c.Endpoint, c.Port, c.HealthzPort, c.ClientCAFile)
	if c.CgroupRoot != "" {
		fmt.Fprintf(&b, "cgroupRoot: %s\n", c.CgroupRoot)
	}
	if len(c.Taints) > 0 {
		b.WriteString("registerWithTaints:\n")
		for _, k := range c.Taints {
			fmt.Fprintf(&b, "- key: %s\n  effect: NoSchedule\n", k)
		}
	}
	return b.String()
}
