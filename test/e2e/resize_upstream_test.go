//go:build e2e

package e2e

import (
	"testing"
)

// cgroupRoot is the node's cgroupRoot: its private runtime's, else the
// test nodes' common one.
func (n *node) cgroupRoot() string {
	if n.rt != nil {
		return n.rt.cgroupRoot
	}
	return e2eCgroupRoot
}

// Every resize test's steps and assertions, run on one upstream kubelet
// v1.34 as the node, one after the other: what the Skiff tests assert is
// what upstream does. The node has the 600m of allocatable CPU
// TestResizeInfeasibleAndDeferred's node has; the other cases fit in it
// since each case's pods are deleted before the next starts.
func TestResizeOnUpstreamKubelet(t *testing.T) {
	cn := newUpstreamClusterNode(t, "systemReserved:\n  cpu: "+resizeReservedCPU()+"\n")
	cases := []struct {
		name string
		body func(*testing.T, *clusterNode)
	}{
		{"InPlaceUpAndDown", resizeInPlaceUpAndDown},
		{"RestartContainerPolicy", resizeRestartContainerPolicy},
		{"Sidecar", resizeSidecar},
		{"MemoryBelowUsageIsRefused", resizeMemoryBelowUsageIsRefused},
		{"InfeasibleAndDeferred", resizeInfeasibleAndDeferred},
		{"SurvivesKubeletRestart", resizeSurvivesRestart},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// The node's own start and stop report to the case running.
			parent := cn.t
			cn.t = t
			defer func() { cn.t = parent }()
			c.body(t, cn)
		})
		cn.deleteAllPods()
	}
}
